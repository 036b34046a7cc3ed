package config

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// Prefix is the prefix of every variable.
const Prefix = "LINKERD2_PROXY_"

// Config is the proxy's configuration. Build it with Default, FromEnv or Load.
type Config struct {
	// Listeners.
	InboundAddr, OutboundAddr, AdminAddr, ControlAddr string

	// The control plane. A *Name set means mTLS to that identity; empty: plaintext.
	DestinationAddr, DestinationName, DestinationContext string
	ProfileSuffixes                                      []string
	PolicyAddr, PolicyName, PolicyWorkload               string
	IdentityAddr, IdentityName                           string

	// The proxy's identity.
	IdentityDisabled bool   // no certificate, no mTLS (tests and plaintext-only meshes)
	LocalName        string // the identity to certify (LINKERD2_PROXY_IDENTITY_LOCAL_NAME)
	IdentityDir      string
	TrustAnchors     string // the PEM itself
	TokenFile        string

	// Inbound.
	InboundDefaultPolicy string
	// ClusterNetworks are the networks the cluster-* default policies admit
	// (LINKERD2_PROXY_POLICY_CLUSTER_NETWORKS); nil: the inbound proxy's defaults, Linkerd's.
	ClusterNetworks                                           []netip.Prefix
	InboundPorts                                              []uint16
	InboundIPs                                                []netip.Addr
	InboundOpaquePorts                                        []uint16 // LINKERD2_PROXY_INBOUND_PORTS_DISABLE_PROTOCOL_DETECTION
	InboundConnectTimeout, OutboundConnectTimeout             time.Duration
	InboundDiscoveryIdleTimeout, OutboundDiscoveryIdleTimeout time.Duration
	DetectTimeout                                             time.Duration
	ShutdownGracePeriod                                       time.Duration

	Log, LogFormat string
	IngressMode    bool
	EnablePprof    bool // not a Linkerd variable: MERIDIAN_PROXY_ENABLE_PPROF / --enable-pprof
	// InsecureControlPlane lets a control-plane service off this host be reached in
	// plaintext when its *_SVC_NAME is unset (tests and local setups only: a warning says
	// so). Not a Linkerd variable: MERIDIAN_PROXY_INSECURE_CONTROL_PLANE /
	// --insecure-control-plane.
	InsecureControlPlane bool
}

// Default returns linkerd2-proxy's defaults.
func Default() Config {
	return Config{
		InboundAddr:                  "0.0.0.0:4143",
		OutboundAddr:                 "127.0.0.1:4140",
		AdminAddr:                    "0.0.0.0:4191",
		ControlAddr:                  "0.0.0.0:4190",
		InboundDefaultPolicy:         "all-unauthenticated",
		InboundConnectTimeout:        100 * time.Millisecond,
		OutboundConnectTimeout:       time.Second,
		InboundDiscoveryIdleTimeout:  90 * time.Second,
		OutboundDiscoveryIdleTimeout: 5 * time.Second,
		DetectTimeout:                10 * time.Second,
		ShutdownGracePeriod:          2 * time.Minute,
		Log:                          "warn,linkerd=info",
		LogFormat:                    "plain",
	}
}

// DefaultPolicies are the values LINKERD2_PROXY_INBOUND_DEFAULT_POLICY takes.
var DefaultPolicies = []string{"deny", "all-authenticated", "all-unauthenticated", "cluster-authenticated", "cluster-unauthenticated", "audit"}

// variable is one setting: its name without the prefix, its help, and how it is parsed into a
// Config.
type variable struct {
	name, help string
	set        func(c *Config, v string) error
	get        func(c *Config) string
	isBool     bool // a flag that takes no value (--identity-disabled)
}

func str(name, help string, f func(*Config) *string) variable {
	return variable{name: name, help: help, set: func(c *Config, v string) error { *f(c) = v; return nil }, get: func(c *Config) string { return *f(c) }}
}

func dur(name, help string, f func(*Config) *time.Duration) variable {
	return variable{name: name, help: help, set: func(c *Config, v string) error {
		d, err := parseDuration(v)
		if err != nil {
			return err
		}
		*f(c) = d
		return nil
	}, get: func(c *Config) string { return f(c).String() }}
}

func boolean(name, help string, f func(*Config) *bool) variable {
	return variable{name: name, help: help, set: func(c *Config, v string) error {
		b, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			return errors.New("want true or false")
		}
		*f(c) = b
		return nil
	}, get: func(c *Config) string { return strconv.FormatBool(*f(c)) }, isBool: true}
}

func ports(name, help string, f func(*Config) *[]uint16) variable {
	return variable{name: name, help: help, set: func(c *Config, v string) error {
		p, err := ParsePorts(v)
		if err != nil {
			return err
		}
		*f(c) = p
		return nil
	}, get: func(c *Config) string { return formatPorts(*f(c)) }}
}

// variables are every setting, in the order help lists them.
var variables = []variable{
	str("INBOUND_LISTEN_ADDR", "inbound listener (mTLS from other proxies)", func(c *Config) *string { return &c.InboundAddr }),
	str("OUTBOUND_LISTEN_ADDR", "outbound listener (transparent, or an HTTP proxy)", func(c *Config) *string { return &c.OutboundAddr }),
	str("ADMIN_LISTEN_ADDR", "admin listener (/live, /ready, /metrics)", func(c *Config) *string { return &c.AdminAddr }),
	str("CONTROL_LISTEN_ADDR", "control listener (tap; unused by Meridian)", func(c *Config) *string { return &c.ControlAddr }),
	str("DESTINATION_SVC_ADDR", "destination service address (host:port)", func(c *Config) *string { return &c.DestinationAddr }),
	str("DESTINATION_SVC_NAME", "destination service identity (set: mTLS to it)", func(c *Config) *string { return &c.DestinationName }),
	str("DESTINATION_CONTEXT", `context token sent with every lookup ({"ns":..,"nodeName":..,"pod":..})`, func(c *Config) *string { return &c.DestinationContext }),
	{name: "DESTINATION_PROFILE_SUFFIXES", help: "name suffixes for which profiles are looked up (comma-separated)",
		set: func(c *Config, v string) error { c.ProfileSuffixes = splitList(v); return nil },
		get: func(c *Config) string { return strings.Join(c.ProfileSuffixes, ",") }},
	str("POLICY_SVC_ADDR", "policy service address (host:port)", func(c *Config) *string { return &c.PolicyAddr }),
	str("POLICY_SVC_NAME", "policy service identity (set: mTLS to it)", func(c *Config) *string { return &c.PolicyName }),
	str("POLICY_WORKLOAD", `this workload for inbound policy ({"ns":..,"pod":..})`, func(c *Config) *string { return &c.PolicyWorkload }),
	str("IDENTITY_SVC_ADDR", "identity service address (host:port)", func(c *Config) *string { return &c.IdentityAddr }),
	str("IDENTITY_SVC_NAME", "identity service identity (set: TLS to it)", func(c *Config) *string { return &c.IdentityName }),
	boolean("IDENTITY_DISABLED", "run without an identity: no certificate, no mTLS", func(c *Config) *bool { return &c.IdentityDisabled }),
	str("IDENTITY_LOCAL_NAME", "this proxy's identity (web.shop.serviceaccount.identity.linkerd.cluster.local)", func(c *Config) *string { return &c.LocalName }),
	str("IDENTITY_DIR", "directory for the identity's files (Meridian keeps the key in memory)", func(c *Config) *string { return &c.IdentityDir }),
	str("IDENTITY_TRUST_ANCHORS", "the trust anchors, PEM", func(c *Config) *string { return &c.TrustAnchors }),
	str("IDENTITY_TOKEN_FILE", "the ServiceAccount token file (audience identity.l5d.io)", func(c *Config) *string { return &c.TokenFile }),
	{name: "INBOUND_DEFAULT_POLICY", help: "inbound policy until the policy service answers: " + strings.Join(DefaultPolicies, ", "),
		set: func(c *Config, v string) error {
			for _, p := range DefaultPolicies {
				if v == p {
					c.InboundDefaultPolicy = v
					return nil
				}
			}
			return fmt.Errorf("want one of %s", strings.Join(DefaultPolicies, ", "))
		}, get: func(c *Config) string { return c.InboundDefaultPolicy }},
	{name: "POLICY_CLUSTER_NETWORKS", help: "the cluster's pod networks, which the cluster-* default policies admit (comma-separated CIDRs; empty: Linkerd's private ranges)",
		set: func(c *Config, v string) error {
			nets, err := ParsePrefixes(v)
			if err != nil {
				return err
			}
			c.ClusterNetworks = nets
			return nil
		}, get: func(c *Config) string { return joinList(c.ClusterNetworks) }},
	ports("INBOUND_PORTS", "the pod's container ports (comma-separated, ranges a-b)", func(c *Config) *[]uint16 { return &c.InboundPorts }),
	{name: "INBOUND_IPS", help: "the pod's IPs (comma-separated)", set: func(c *Config, v string) error {
		var ips []netip.Addr
		for _, s := range splitList(v) {
			ip, err := netip.ParseAddr(s)
			if err != nil {
				return fmt.Errorf("%s is not an IP address", quote(s))
			}
			ips = append(ips, ip)
		}
		c.InboundIPs = ips
		return nil
	}, get: func(c *Config) string { return joinList(c.InboundIPs) }},
	ports("INBOUND_PORTS_DISABLE_PROTOCOL_DETECTION", "inbound ports proxied as opaque TCP", func(c *Config) *[]uint16 { return &c.InboundOpaquePorts }),
	dur("INBOUND_CONNECT_TIMEOUT", "timeout of connections to the application", func(c *Config) *time.Duration { return &c.InboundConnectTimeout }),
	dur("OUTBOUND_CONNECT_TIMEOUT", "timeout of connections to endpoints", func(c *Config) *time.Duration { return &c.OutboundConnectTimeout }),
	dur("INBOUND_DISCOVERY_IDLE_TIMEOUT", "how long inbound policy of an unused port is kept", func(c *Config) *time.Duration { return &c.InboundDiscoveryIdleTimeout }),
	dur("OUTBOUND_DISCOVERY_IDLE_TIMEOUT", "how long discovery of an unused target is kept", func(c *Config) *time.Duration { return &c.OutboundDiscoveryIdleTimeout }),
	dur("DETECT_PROTOCOL_TIMEOUT", "protocol detection timeout (then opaque)", func(c *Config) *time.Duration { return &c.DetectTimeout }),
	dur("SHUTDOWN_GRACE_PERIOD", "how long in-flight work may drain after SIGTERM", func(c *Config) *time.Duration { return &c.ShutdownGracePeriod }),
	str("LOG", "log level (linkerd2-proxy's filter syntax; its first level is used)", func(c *Config) *string { return &c.Log }),
	str("LOG_FORMAT", "log format: plain or json", func(c *Config) *string { return &c.LogFormat }),
	boolean("INGRESS_MODE", "ingress mode (route by Host header)", func(c *Config) *bool { return &c.IngressMode }),
}

// FlagName is the command-line flag of a variable given without the prefix.
func FlagName(v string) string { return strings.ReplaceAll(strings.ToLower(v), "_", "-") }

// FromEnv returns Default overridden by every set variable that lookup finds (os.LookupEnv).
// A variable set to the empty string keeps the default, as linkerd2-proxy treats it.
func FromEnv(lookup func(string) (string, bool)) (Config, error) {
	c := Default()
	var errs []error
	for _, v := range variables {
		val, ok := lookup(Prefix + v.name)
		if !ok || val == "" {
			continue
		}
		if err := v.set(&c, val); err != nil {
			errs = append(errs, &VarError{Name: v.name, Value: val, Err: err})
		}
	}
	for _, b := range []struct {
		name string
		dst  *bool
	}{{"MERIDIAN_PROXY_ENABLE_PPROF", &c.EnablePprof}, {"MERIDIAN_PROXY_INSECURE_CONTROL_PLANE", &c.InsecureControlPlane}} {
		if val, ok := lookup(b.name); ok && val != "" {
			v, err := strconv.ParseBool(val)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s=%s: want true or false", b.name, quote(val)))
			}
			*b.dst = v
		}
	}
	return c, errors.Join(errs...)
}

// VarError is a variable FromEnv could not use: Name (without the prefix) was set to Value.
type VarError struct {
	Name, Value string
	Err         error
}

func (e *VarError) Error() string {
	return fmt.Sprintf("%s%s=%s: %v", Prefix, e.Name, quote(e.Value), e.Err)
}

func (e *VarError) Unwrap() error { return e.Err }

// Unoverridden returns the errors of FromEnv (err) whose variables no flag of fs set after
// Flags: a flag given on the command line replaces a variable, bad or not.
func Unoverridden(err error, fs *flag.FlagSet) error {
	if err == nil {
		return nil
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var errs []error
	for _, e := range flatten(err) {
		var ve *VarError
		if errors.As(e, &ve) && set[FlagName(ve.Name)] {
			continue
		}
		errs = append(errs, e)
	}
	return errors.Join(errs...)
}

// flatten returns the errors an errors.Join holds, or err alone.
func flatten(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// Flags registers a flag for every variable on fs, defaulting to c's values (so call it
// with the Config FromEnv returned: flags then override the environment).
func (c *Config) Flags(fs *flag.FlagSet) {
	for _, v := range variables {
		usage := fmt.Sprintf("%s ($%s%s, default %q)", v.help, Prefix, v.name, v.get(c))
		set := func(s string) error {
			if err := v.set(c, s); err != nil {
				return fmt.Errorf("%s: %w", quote(s), err)
			}
			return nil
		}
		if v.isBool {
			fs.BoolFunc(FlagName(v.name), usage, set)
		} else {
			fs.Func(FlagName(v.name), usage, set)
		}
	}
	fs.BoolVar(&c.EnablePprof, "enable-pprof", c.EnablePprof, "serve /debug/pprof/ on the admin port ($MERIDIAN_PROXY_ENABLE_PPROF)")
	fs.BoolVar(&c.InsecureControlPlane, "insecure-control-plane", c.InsecureControlPlane,
		"reach a control-plane service off this host in plaintext when its *-svc-name is unset: tests and local setups only ($MERIDIAN_PROXY_INSECURE_CONTROL_PLANE)")
}

// Validate checks what the proxy needs to start.
func (c Config) Validate() error {
	var errs []error
	need := func(ok bool, what string) {
		if !ok {
			errs = append(errs, errors.New(what))
		}
	}
	need(c.DestinationAddr != "", "no destination service: set "+Prefix+"DESTINATION_SVC_ADDR or --destination-svc-addr")
	if !c.IdentityDisabled {
		need(c.IdentityAddr != "", "no identity service: set "+Prefix+"IDENTITY_SVC_ADDR (or "+Prefix+"IDENTITY_DISABLED=true)")
		need(c.LocalName != "", "no local identity: set "+Prefix+"IDENTITY_LOCAL_NAME")
		need(strings.TrimSpace(c.TrustAnchors) != "", "no trust anchors: set "+Prefix+"IDENTITY_TRUST_ANCHORS")
		need(c.TokenFile != "", "no token file: set "+Prefix+"IDENTITY_TOKEN_FILE")
	}
	// A control-plane service off this host is reached over TLS verifying its name, as
	// linkerd2-proxy requires (parse_control_addr): plaintext would carry the ServiceAccount
	// token to identity, and take discovery and policy from whoever answers. Only a loopback
	// address, or a proxy without identity (which has no certificate to offer), goes without,
	// or one told so explicitly (InsecureControlPlane).
	if !c.IdentityDisabled && !c.InsecureControlPlane {
		for _, svc := range []struct{ base, addr, name string }{
			{"DESTINATION_SVC", c.DestinationAddr, c.DestinationName},
			{"POLICY_SVC", c.PolicyAddr, c.PolicyName},
			{"IDENTITY_SVC", c.IdentityAddr, c.IdentityName},
		} {
			if svc.addr != "" && svc.name == "" && !loopback(svc.addr) {
				errs = append(errs, fmt.Errorf("%s%s_NAME must be set when %s%s_ADDR (%s) is not a loopback address: the connection would be plaintext",
					Prefix, svc.base, Prefix, svc.base, quote(svc.addr)))
			}
		}
	}
	for _, a := range []struct{ name, addr string }{{"INBOUND_LISTEN_ADDR", c.InboundAddr}, {"OUTBOUND_LISTEN_ADDR", c.OutboundAddr}, {"ADMIN_LISTEN_ADDR", c.AdminAddr}} {
		if _, _, err := splitHostPort(a.addr); err != nil {
			errs = append(errs, fmt.Errorf("%s=%s: %w", setting(a.name), quote(a.addr), err))
		}
	}
	// A control-plane address must name a host and a port to dial: a malformed one would
	// start a proxy that retries it for good (and stays unready) instead of saying why.
	for _, a := range []struct{ name, addr string }{{"DESTINATION_SVC_ADDR", c.DestinationAddr}, {"POLICY_SVC_ADDR", c.PolicyAddr}, {"IDENTITY_SVC_ADDR", c.IdentityAddr}} {
		if a.addr == "" {
			continue // required or not, said above
		}
		if host, p, err := splitHostPort(a.addr); err != nil || host == "" || p == 0 {
			if err == nil {
				err = errors.New("want host:port with a host and a port other than 0")
			}
			errs = append(errs, fmt.Errorf("%s=%s: %w", setting(a.name), quote(a.addr), err))
		}
	}
	return errors.Join(errs...)
}

// setting names a variable and the flag that replaces it: "LINKERD2_PROXY_ADMIN_LISTEN_ADDR
// (--admin-listen-addr)", so that an error names what the user gave, whichever it was.
func setting(base string) string {
	return Prefix + base + " (--" + FlagName(base) + ")"
}

// ParsePorts parses a port list: "4143,8080-8090"; spaces allowed, an empty list is nil.
func ParsePorts(s string) ([]uint16, error) {
	var out []uint16
	for _, part := range splitList(s) {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := port(lo)
		if err != nil {
			return nil, err
		}
		b := a
		if isRange {
			if b, err = port(hi); err != nil {
				return nil, err
			}
			if b < a {
				return nil, fmt.Errorf("range %s runs backwards", quote(part))
			}
		}
		for p := int(a); p <= int(b); p++ {
			out = append(out, uint16(p))
		}
	}
	return out, nil
}

// ParsePrefixes parses a comma-separated list of CIDRs (masked: 10.1.2.3/8 is 10.0.0.0/8).
func ParsePrefixes(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, part := range splitList(s) {
		p, err := netip.ParsePrefix(part)
		if err != nil {
			return nil, fmt.Errorf("%s is not a CIDR", quote(part))
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

func port(s string) (uint16, error) {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n < 1 || n > 65535 {
		return 0, fmt.Errorf("%s is not a port (1-65535)", quote(s))
	}
	return uint16(n), nil
}

func formatPorts(ps []uint16) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = strconv.Itoa(int(p))
	}
	return strings.Join(s, ",")
}

// joinList is the comma-separated list of xs, as splitList reads it.
func joinList[T fmt.Stringer](xs []T) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = x.String()
	}
	return strings.Join(s, ",")
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// parseDuration accepts Go durations ("3s", "100ms") and linkerd2-proxy's bare seconds ("3").
func parseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if n, err := strconv.ParseFloat(s, 64); err == nil && n >= 0 {
		// Beyond time.Duration's range (about 292 years, or Inf) the conversion would wrap.
		if n*float64(time.Second) >= math.MaxInt64 {
			return 0, errors.New("want a duration under 292 years")
		}
		return time.Duration(n * float64(time.Second)), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, errors.New("want a duration such as 3s or 100ms")
	}
	return d, nil
}

// splitHostPort splits a listener address; port 0 is a port the kernel picks, as
// linkerd2-proxy binds it (tests and one-machine runs).
func splitHostPort(addr string) (string, uint16, error) {
	i := strings.LastIndexByte(addr, ':')
	if i < 0 {
		return "", 0, errors.New("want host:port")
	}
	if strings.TrimSpace(addr[i+1:]) == "0" {
		return addr[:i], 0, nil
	}
	p, err := port(addr[i+1:])
	return addr[:i], p, err
}

// loopback reports whether host:port addr names this host: a loopback IP or localhost.
func loopback(addr string) bool {
	host, _, err := splitHostPort(addr)
	if err != nil {
		return false
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if ip, err := netip.ParseAddr(host); err == nil {
		return ip.IsLoopback()
	}
	return strings.EqualFold(strings.TrimSuffix(host, "."), "localhost")
}

// quote quotes at most 64 bytes of a bad value.
func quote(s string) string {
	if len(s) > 64 {
		return strconv.Quote(s[:64]) + "..."
	}
	return strconv.Quote(s)
}
