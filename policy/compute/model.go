package compute

import (
	"net/netip"
	"time"

	"k8s.io/apimachinery/pkg/labels"
)

// Config is the cluster-wide knowledge Inbound needs. It is read-only once built.
type Config struct {
	// ClusterNetworks hold the cluster's pod networks: the networks of the cluster-* default
	// policies and of a ServerAuthorization that names none.
	ClusterNetworks []netip.Prefix
	// ProbeNetworks are the networks that kubelet probes come from. Empty disables probe routes.
	ProbeNetworks []netip.Prefix
	// DefaultPolicy applies to pods without the default-inbound-policy annotation.
	DefaultPolicy DefaultPolicy
	// DetectTimeout is the protocol detection timeout sent with ProxyProtocol.Detect.
	DetectTimeout time.Duration
	// ControlPlaneNamespace and IdentityDomain build mesh identities:
	// <sa>.<ns>.serviceaccount.identity.<ControlPlaneNamespace>.<IdentityDomain>.
	ControlPlaneNamespace string
	IdentityDomain        string
}

// DefaultConfig returns Linkerd's defaults: all-unauthenticated, the RFC 1918 + CGNAT + ULA
// cluster networks, probes from anywhere, a 10s detect timeout and identities under
// linkerd / cluster.local.
func DefaultConfig() Config {
	return Config{
		ClusterNetworks: []netip.Prefix{
			netip.MustParsePrefix("10.0.0.0/8"),
			netip.MustParsePrefix("100.64.0.0/10"),
			netip.MustParsePrefix("172.16.0.0/12"),
			netip.MustParsePrefix("192.168.0.0/16"),
			netip.MustParsePrefix("fd00::/8"),
		},
		ProbeNetworks:         []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0")},
		DefaultPolicy:         AllUnauthenticated,
		DetectTimeout:         10 * time.Second,
		ControlPlaneNamespace: "linkerd",
		IdentityDomain:        "cluster.local",
	}
}

// ServiceAccountIdentity is the mesh identity of a ServiceAccount.
func (c *Config) ServiceAccountIdentity(ns, sa string) string {
	return sa + "." + ns + ".serviceaccount.identity." + c.ControlPlaneNamespace + "." + c.IdentityDomain
}

// NamespaceIdentitySuffix is the identity suffix (without "*.") matching every ServiceAccount
// of a namespace.
func (c *Config) NamespaceIdentitySuffix(ns string) string {
	return ns + ".serviceaccount.identity." + c.ControlPlaneNamespace + "." + c.IdentityDomain
}

// Key names a namespaced object.
type Key struct{ Namespace, Name string }

func (k Key) String() string { return k.Namespace + "/" + k.Name }

// PortSet is a set of TCP ports.
type PortSet map[uint32]struct{}

// Has reports whether p is in the set.
func (s PortSet) Has(p uint32) bool { _, ok := s[p]; return ok }

// Pod is what Inbound needs of a pod. Values are immutable once handed to an index.
type Pod struct {
	Namespace, Name string
	Labels          map[string]string
	// DefaultPolicy is the parsed config.linkerd.io/default-inbound-policy annotation, or
	// nil when absent (then the cluster default applies); deny when it does not parse.
	DefaultPolicy  *DefaultPolicy
	OpaquePorts    PortSet // config.linkerd.io/opaque-ports
	RequireIDPorts PortSet // config.linkerd.io/proxy-require-identity-inbound-ports
	// RequireIDAll: the require-identity annotation does not parse, and every port requires
	// identity (it fails closed).
	RequireIDAll bool
	// PortNames maps a named TCP container port to its numbers (several containers may each
	// declare the same name).
	PortNames map[string][]uint32
	// Probes maps a port to the sorted, de-duplicated httpGet probe paths on it.
	Probes map[uint32][]string
}

// Protocol is a Server's proxyProtocol.
type Protocol int

// The protocols of Server.spec.proxyProtocol.
const (
	ProtocolDetect Protocol = iota // "unknown" (or unset)
	ProtocolHTTP1                  // "HTTP/1"
	ProtocolHTTP2                  // "HTTP/2"
	ProtocolGRPC                   // "gRPC"
	ProtocolOpaque                 // "opaque"
	ProtocolTLS                    // "TLS"
)

// PortRef is a Server's port: a number, or a container port name when Name is set.
type PortRef struct {
	Number uint32
	Name   string
}

// Selector selects objects by their labels. policy/api builds it with the semantics of
// Linkerd's policy controller; a labels.Selector is one too.
type Selector interface {
	Matches(labels.Labels) bool
}

// Server is a validated policy.linkerd.io Server.
type Server struct {
	Namespace, Name string
	Labels          map[string]string
	Created         time.Time
	// PodSelector selects pods; nil when the Server selects external workloads instead.
	PodSelector Selector
	// ExternalWorkloadSelector is kept for completeness; Meridian indexes no external workloads.
	ExternalWorkloadSelector Selector
	Port                     PortRef
	Protocol                 Protocol
	// AccessPolicy is the authorization applied when no other matches (default deny).
	AccessPolicy DefaultPolicy
}

// TargetKind is what an AuthorizationPolicy targets.
type TargetKind int

// Kinds of AuthorizationPolicy targets.
const (
	TargetServer TargetKind = iota
	TargetNamespace
	TargetHTTPRoute
	TargetGRPCRoute
)

// AuthorizationPolicy is a validated policy.linkerd.io AuthorizationPolicy.
type AuthorizationPolicy struct {
	Namespace, Name string
	Target          TargetKind
	TargetName      string
	Authentications []AuthnRef
}

// AuthnKind is the kind of a required authentication.
type AuthnKind int

// Kinds of requiredAuthenticationRefs.
const (
	AuthnMeshTLS AuthnKind = iota
	AuthnNetwork
	AuthnServiceAccount
)

// AuthnRef is one of an AuthorizationPolicy's requiredAuthenticationRefs; Namespace is
// always filled (the policy's own when the ref has none).
type AuthnRef struct {
	Kind            AuthnKind
	Namespace, Name string
}

// IdentityRefKind is the kind of a MeshTLSAuthentication identityRef.
type IdentityRefKind int

// Kinds of identityRefs.
const (
	IdentityRefServiceAccount IdentityRefKind = iota
	IdentityRefNamespace
)

// IdentityRef is a MeshTLSAuthentication identityRef with its namespace filled in.
type IdentityRef struct {
	Kind            IdentityRefKind
	Namespace, Name string
}

// MeshTLSAuthentication is a validated policy.linkerd.io MeshTLSAuthentication.
type MeshTLSAuthentication struct {
	Namespace, Name string
	Identities      []string // literal identities, "*" or "*.suffix" globs
	IdentityRefs    []IdentityRef
}

// NetworkMatch is a CIDR with exceptions.
type NetworkMatch struct {
	Net    netip.Prefix
	Except []netip.Prefix
}

// NetworkAuthentication is a validated policy.linkerd.io NetworkAuthentication.
type NetworkAuthentication struct {
	Namespace, Name string
	Networks        []NetworkMatch
}

// ServerAuthorization is a validated policy.linkerd.io ServerAuthorization (the legacy API).
type ServerAuthorization struct {
	Namespace, Name string
	// Exactly one of ServerName and ServerSelector is set.
	ServerName      string
	ServerSelector  Selector
	Networks        []NetworkMatch // empty: the cluster networks
	Unauthenticated bool
	// MeshTLS applies when Unauthenticated is false.
	UnauthenticatedTLS bool
	Identities         []string
	ServiceAccounts    []Key // namespace filled in
}

// Resources are the policy objects Inbound reads. Servers, AuthorizationPolicies and
// ServerAuthorizations are those of the pod's namespace; the authentications are looked up
// across namespaces by key. Inbound never modifies them.
type Resources struct {
	Servers               []*Server
	AuthorizationPolicies []*AuthorizationPolicy
	ServerAuthorizations  []*ServerAuthorization
	MeshTLS               map[Key]*MeshTLSAuthentication
	Networks              map[Key]*NetworkAuthentication
}
