package injector

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/meridian-mesh/meridian/internal/quote"
)

// Config is the injector's cluster-wide configuration: the defaults that
// config.linkerd.io/* annotations override per namespace or pod. Build it with DefaultConfig
// and change fields; the zero value is not useful. A Config is read-only once handed to a
// Webhook or to the manifest transform.
type Config struct {
	// ControlPlaneNamespace is where destination, identity and policy run ("linkerd").
	ControlPlaneNamespace string
	// ClusterDomain is the cluster's DNS suffix ("cluster.local").
	ClusterDomain string
	// TrustDomain is the identity trust domain ("cluster.local").
	TrustDomain string
	// TrustAnchorsPEM is the PEM bundle the proxy trusts (LINKERD2_PROXY_IDENTITY_TRUST_ANCHORS).
	TrustAnchorsPEM string
	// ClusterNetworks are the cluster's pod networks, which a proxy's cluster-* default
	// policies admit (LINKERD2_PROXY_POLICY_CLUSTER_NETWORKS, the chart's clusterNetworks, as
	// the policy controller's --cluster-networks). Empty: not written, and the proxy uses
	// Linkerd's private ranges.
	ClusterNetworks []netip.Prefix

	// Service names (in ControlPlaneNamespace) and ports of the control plane.
	DestinationService string // "linkerd-dst-headless"
	DestinationPort    int    // 8086
	IdentityService    string // "linkerd-identity-headless"
	IdentityPort       int    // 8080
	PolicyService      string // "linkerd-policy"
	PolicyPort         int    // 8090
	// DestinationSA, IdentitySA and PolicySA are the control-plane ServiceAccounts whose
	// identities the proxy expects the control plane to present (the *_SVC_NAME variables).
	// The policy controller runs in a Deployment of its own under linkerd-policy (in Linkerd
	// it is a container of the destination pod, under linkerd-destination).
	DestinationSA string // "linkerd-destination"
	IdentitySA    string // "linkerd-identity"
	PolicySA      string // "linkerd-policy"

	// CreatedBy is written to linkerd.io/created-by ("meridian/injector dev").
	CreatedBy string

	// Proxy holds the per-pod defaults that annotations override.
	Proxy ProxyDefaults
}

// ProxyDefaults are the defaults of every value a config.linkerd.io/* annotation overrides.
// Empty resource strings mean "not set" (no request or limit).
type ProxyDefaults struct {
	Image            string // "ghcr.io/meridian-mesh/meridian"
	Version          string // image tag, "latest"
	InitImage        string // "ghcr.io/meridian-mesh/meridian-proxy-init" (has iptables); "" means Image
	InitVersion      string // "" means Version
	ImagePullPolicy  string // "IfNotPresent"
	CPURequest       string
	CPULimit         string
	MemoryRequest    string
	MemoryLimit      string
	EphemeralRequest string
	EphemeralLimit   string
	LogLevel         string // "warn,linkerd=info"
	LogFormat        string // "plain"
	UID              int64  // 2102
	GID              int64  // -1: not set
	InboundPort      int    // 4143
	OutboundPort     int    // 4140
	AdminPort        int    // 4191
	ControlPort      int    // 4190
	SkipInboundPorts string // comma list of ports or ranges
	SkipOutbound     string
	// OpaquePorts are the ports proxied as opaque TCP by default ("25,587,3306,4444,5432,
	// 6379,9300,11211", Linkerd's): a pod without config.linkerd.io/opaque-ports (its own or
	// its namespace's) gets those of them its containers declare, as Linkerd's injector
	// writes them, since the policy controller reads the pod's annotation alone.
	OpaquePorts    []uint16
	NativeSidecar  bool   // true
	DefaultInbound string // "all-unauthenticated"
	// Command is the proxy container's command, ["meridian-proxy"]: the proxy built alone,
	// whose RSS is about half that of `meridian proxy`. An image without it can run
	// ["meridian", "proxy"].
	Command []string
	Args    []string // the proxy container's args; none by default
	// InitCommand is the capture init container's command, ["meridian", "proxy-init"]; its
	// args are InitArgs (none by default) and then the generated --flags.
	InitCommand []string
	InitArgs    []string
}

// DefaultConfig returns the configuration Meridian ships with: Linkerd's names and ports,
// the Meridian image running `meridian-proxy` as the proxy, and the proxy-init image running
// `meridian proxy-init` as the capture init container.
func DefaultConfig() Config {
	return Config{
		ControlPlaneNamespace: "linkerd",
		ClusterDomain:         "cluster.local",
		TrustDomain:           "cluster.local",
		DestinationService:    "linkerd-dst-headless",
		DestinationPort:       8086,
		IdentityService:       "linkerd-identity-headless",
		IdentityPort:          8080,
		PolicyService:         "linkerd-policy",
		PolicyPort:            8090,
		DestinationSA:         "linkerd-destination",
		IdentitySA:            "linkerd-identity",
		PolicySA:              "linkerd-policy",
		CreatedBy:             "meridian/injector dev",
		Proxy: ProxyDefaults{
			Image:           "ghcr.io/meridian-mesh/meridian",
			Version:         "latest",
			InitImage:       "ghcr.io/meridian-mesh/meridian-proxy-init",
			ImagePullPolicy: "IfNotPresent",
			LogLevel:        "warn,linkerd=info",
			LogFormat:       "plain",
			UID:             2102,
			GID:             -1,
			InboundPort:     4143,
			OutboundPort:    4140,
			AdminPort:       4191,
			ControlPort:     4190,
			NativeSidecar:   true,
			DefaultInbound:  "all-unauthenticated",
			OpaquePorts:     []uint16{25, 587, 3306, 4444, 5432, 6379, 9300, 11211},
			Command:         []string{"meridian-proxy"},
			InitCommand:     []string{"meridian", "proxy-init"},
		},
	}
}

// Validate reports a configuration that cannot produce a working pod.
func (c *Config) Validate() error {
	switch {
	case c.ControlPlaneNamespace == "":
		return fmt.Errorf("control-plane namespace is empty")
	case c.ClusterDomain == "" || c.TrustDomain == "":
		return fmt.Errorf("cluster domain and trust domain must be set")
	case c.Proxy.Image == "":
		return fmt.Errorf("proxy image is empty")
	}
	if err := checkCommand(c.Proxy.Command); err != nil {
		return fmt.Errorf("proxy command: %w", err)
	}
	if err := checkCommand(c.Proxy.InitCommand); err != nil {
		return fmt.Errorf("proxy-init command: %w", err)
	}
	// The defaults an annotation would be checked against: a flag gives them unchecked.
	if _, err := parseUID(strconv.FormatInt(c.Proxy.UID, 10)); err != nil {
		return fmt.Errorf("proxy uid %d: %w", c.Proxy.UID, err)
	}
	if _, err := proxyLogFilter(c.Proxy.LogLevel); err != nil {
		return fmt.Errorf("proxy log level %s: %w", quote.String(c.Proxy.LogLevel), err)
	}
	if _, _, err := c.Resolve(Meta{}, nil); err != nil {
		return fmt.Errorf("proxy defaults: %w", err)
	}
	return nil
}

// checkCommand reports a container command that cannot start a process: an empty one, or
// one whose program is empty. The image's entrypoint is never relied upon.
func checkCommand(cmd []string) error {
	switch {
	case len(cmd) == 0:
		return errors.New("empty (the image's entrypoint is not relied upon: name the program)")
	case strings.TrimSpace(cmd[0]) == "":
		return fmt.Errorf("empty program name in %q", cmd)
	}
	return nil
}

func (c *Config) svcAddr(name string, port int) string {
	return fmt.Sprintf("%s.%s.svc.%s.:%d", name, c.ControlPlaneNamespace, c.ClusterDomain, port)
}

func (c *Config) saIdentity(sa string) string {
	return fmt.Sprintf("%s.%s.serviceaccount.identity.%s.%s", sa, c.ControlPlaneNamespace, c.ControlPlaneNamespace, c.TrustDomain)
}

// trustRootSHA256 is the hex SHA-256 of the trust anchors, "" when there are none.
func (c *Config) trustRootSHA256() string {
	pem := strings.TrimSpace(c.TrustAnchorsPEM)
	if pem == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(c.TrustAnchorsPEM))
	return hex.EncodeToString(sum[:])
}
