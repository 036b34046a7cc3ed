package policy

import (
	"fmt"
	"net/netip"
	"time"
)

// The default inbound policies (LINKERD2_PROXY_INBOUND_DEFAULT_POLICY).
const (
	DefaultDeny                   = "deny"
	DefaultAllAuthenticated       = "all-authenticated"
	DefaultAllUnauthenticated     = "all-unauthenticated"
	DefaultClusterAuthenticated   = "cluster-authenticated"
	DefaultClusterUnauthenticated = "cluster-unauthenticated"
	DefaultAudit                  = "audit"
)

var allNetworks = []Network{{Net: netip.MustParsePrefix("0.0.0.0/0")}, {Net: netip.MustParsePrefix("::/0")}}

// Default returns the default policy name as linkerd2-proxy builds it when it has no policy
// from the service: protocol detection with detectTimeout, one authorization named after
// the policy (none for deny), and the default route. clusterNetworks are the networks of the
// cluster-* policies. audit allows everything, like all-unauthenticated; the proxy counts
// and logs what it allows under it.
func Default(name string, clusterNetworks []netip.Prefix, detectTimeout time.Duration) (*Server, error) {
	a := &Authz{Name: name, Kind: "default"}
	switch name {
	case DefaultDeny:
		a = nil
	case DefaultAllUnauthenticated, DefaultAudit:
		a.Networks, a.Authn = allNetworks, Authn{Kind: Unauthenticated}
	case DefaultAllAuthenticated:
		a.Networks, a.Authn = allNetworks, Authn{Kind: TLSAuthenticated, Suffixes: []string{""}}
	case DefaultClusterUnauthenticated, DefaultClusterAuthenticated:
		if len(clusterNetworks) == 0 {
			return nil, fmt.Errorf("default inbound policy %s: no cluster networks configured", name)
		}
		for _, p := range clusterNetworks {
			a.Networks = append(a.Networks, Network{Net: p.Masked()})
		}
		a.Authn = Authn{Kind: Unauthenticated}
		if name == DefaultClusterAuthenticated {
			a.Authn = Authn{Kind: TLSAuthenticated, Suffixes: []string{""}}
		}
	default:
		return nil, fmt.Errorf("invalid default inbound policy %q: want one of deny, all-authenticated, all-unauthenticated, cluster-authenticated, cluster-unauthenticated, audit", short(name))
	}
	s := &Server{Name: name, Kind: "default", Protocol: Detect, DetectTimeout: detectTimeout}
	if a != nil {
		s.Authorizations = []*Authz{a}
	}
	s.HTTPRoutes = []*HTTPRoute{defaultHTTPRoute(s.Authorizations)}
	return s, nil
}

// Invalid is the policy of a port whose policy from the service did not compile and that has
// no good one to keep (linkerd2-proxy's "invalid" policy): nothing is authorized.
func Invalid(detectTimeout time.Duration) *Server {
	s := &Server{Name: "invalid", Kind: "default", Protocol: Detect, DetectTimeout: detectTimeout}
	s.HTTPRoutes = []*HTTPRoute{defaultHTTPRoute(nil)}
	return s
}
