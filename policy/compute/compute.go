package compute

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/linkerd/linkerd2-proxy-api/go/inbound"
	"k8s.io/apimachinery/pkg/labels"
)

// Result is the outcome of Inbound for one pod port.
type Result struct {
	// Server is the policy to send. It is freshly built and owned by the caller.
	Server *inbound.Server
	// ServerName is the Server resource that selected the port, or "" for a default policy.
	ServerName string
	// Conflicts names the other Servers that also select the port and lost to ServerName.
	Conflicts []string
	// Ignored says which AuthorizationPolicies or ServerAuthorizations targeting the Server
	// were left out and why (an unresolved reference, two MeshTLSAuthentications, ...).
	Ignored []string
}

// SelectingServers returns the Servers of res that select pod's port, winner first: oldest
// creationTimestamp, then name. Servers selecting external workloads never match a pod.
func SelectingServers(res *Resources, pod *Pod, port uint32) []*Server {
	var out []*Server
	set := labels.Set(pod.Labels)
	for _, s := range res.Servers {
		if s.PodSelector == nil || s.Namespace != pod.Namespace || !s.PodSelector.Matches(set) {
			continue
		}
		if !s.Port.selects(pod, port) {
			continue
		}
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b *Server) int {
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out
}

func (r PortRef) selects(pod *Pod, port uint32) bool {
	if r.Name == "" {
		return r.Number == port
	}
	return slices.Contains(pod.PortNames[r.Name], port)
}

// Inbound computes the inbound policy of pod's port from res under cfg.
func Inbound(cfg *Config, res *Resources, pod *Pod, port uint32) Result {
	servers := SelectingServers(res, pod, port)
	if len(servers) == 0 {
		return Result{Server: defaultServer(cfg, pod, port).proto(cfg)}
	}
	srv := servers[0]
	r := Result{ServerName: srv.Name}
	for _, s := range servers[1:] {
		r.Conflicts = append(r.Conflicts, s.Name)
	}
	r.Server = namedServer(cfg, res, pod, port, srv, &r.Ignored).proto(cfg)
	return r
}

func defaultServer(cfg *Config, pod *Pod, port uint32) *inboundServer {
	policy := cfg.DefaultPolicy
	if pod.DefaultPolicy != nil {
		policy = *pod.DefaultPolicy
	}
	if pod.RequireIDAll || pod.RequireIDPorts.Has(port) {
		policy = policy.authenticated()
	}
	proto := ProtocolDetect
	if pod.OpaquePorts.Has(port) {
		proto = ProtocolOpaque
	}
	return &inboundServer{
		Ref:            serverRef{Default: policy.String()},
		Protocol:       proto,
		DetectTimeout:  cfg.DetectTimeout,
		Authorizations: defaultAuthzs(cfg, policy),
		ProbePaths:     probePaths(cfg, pod, port),
		ProbeNetworks:  cfg.ProbeNetworks,
	}
}

func probePaths(cfg *Config, pod *Pod, port uint32) []string {
	if len(cfg.ProbeNetworks) == 0 {
		return nil
	}
	return pod.Probes[port]
}

var allNetworks = []NetworkMatch{
	{Net: netip.MustParsePrefix("0.0.0.0/0")},
	{Net: netip.MustParsePrefix("::/0")},
}

// defaultAuthzs are the authorizations a default policy implies: none for deny; an
// unauthenticated one from everywhere for audit (the proxy logs rather than denies).
func defaultAuthzs(cfg *Config, p DefaultPolicy) []authorization {
	var a authorization
	a.Ref = authzRef{Kind: authzDefault, Name: p.String()}
	switch p {
	case Deny:
		return nil
	case Audit, AllUnauthenticated:
		a.Networks, a.Authn = allNetworks, authn{Kind: permitUnauthenticated}
	case AllAuthenticated:
		a.Networks, a.Authn = allNetworks, authn{Kind: permitIdentities, Suffixes: [][]string{{}}}
	case ClusterUnauthenticated:
		a.Networks, a.Authn = prefixNetworks(cfg.ClusterNetworks), authn{Kind: permitUnauthenticated}
	case ClusterAuthenticated:
		a.Networks, a.Authn = prefixNetworks(cfg.ClusterNetworks), authn{Kind: permitIdentities, Suffixes: [][]string{{}}}
	default:
		return nil
	}
	return []authorization{a}
}

func prefixNetworks(ps []netip.Prefix) []NetworkMatch {
	out := make([]NetworkMatch, len(ps))
	for i, p := range ps {
		out[i] = NetworkMatch{Net: p}
	}
	return out
}

func namedServer(cfg *Config, res *Resources, pod *Pod, port uint32, srv *Server, ignored *[]string) *inboundServer {
	out := &inboundServer{
		Ref:           serverRef{Server: srv.Name},
		Protocol:      srv.Protocol,
		DetectTimeout: cfg.DetectTimeout,
		ProbePaths:    probePaths(cfg, pod, port),
		ProbeNetworks: cfg.ProbeNetworks,
	}
	sazs := slices.Clone(res.ServerAuthorizations)
	slices.SortFunc(sazs, func(a, b *ServerAuthorization) int { return strings.Compare(a.Name, b.Name) })
	for _, saz := range sazs {
		if saz.Namespace != srv.Namespace || !saz.selects(srv) {
			continue
		}
		a, err := serverAuthorization(cfg, saz)
		if err != nil {
			*ignored = append(*ignored, fmt.Sprintf("ServerAuthorization %s: %v", saz.Name, err))
			continue
		}
		out.Authorizations = append(out.Authorizations, a)
	}
	aps := slices.Clone(res.AuthorizationPolicies)
	slices.SortFunc(aps, func(a, b *AuthorizationPolicy) int { return strings.Compare(a.Name, b.Name) })
	for _, ap := range aps {
		if ap.Namespace != srv.Namespace {
			continue
		}
		switch ap.Target {
		case TargetServer:
			if ap.TargetName != srv.Name {
				continue
			}
		case TargetNamespace:
		default:
			// Route-targeted policies authorise routes; Meridian serves no route resources.
			continue
		}
		a, err := policyAuthorization(cfg, res, ap)
		if err != nil {
			*ignored = append(*ignored, fmt.Sprintf("AuthorizationPolicy %s: %v", ap.Name, err))
			continue
		}
		out.Authorizations = append(out.Authorizations, a)
	}
	out.Authorizations = append(out.Authorizations, defaultAuthzs(cfg, srv.AccessPolicy)...)
	return out
}

func (saz *ServerAuthorization) selects(srv *Server) bool {
	if saz.ServerSelector != nil {
		return saz.ServerSelector.Matches(labels.Set(srv.Labels))
	}
	return saz.ServerName == srv.Name
}

func serverAuthorization(cfg *Config, saz *ServerAuthorization) (authorization, error) {
	a := authorization{
		Ref:      authzRef{Kind: authzServerAuthorization, Name: saz.Name},
		Networks: saz.Networks,
	}
	if len(a.Networks) == 0 {
		a.Networks = prefixNetworks(cfg.ClusterNetworks)
	}
	switch {
	case saz.Unauthenticated:
		a.Authn = authn{Kind: permitUnauthenticated}
	case saz.UnauthenticatedTLS:
		a.Authn = authn{Kind: permitTLSUnauthenticated}
	default:
		a.Authn = authn{Kind: permitIdentities}
		for _, id := range saz.Identities {
			a.Authn.add(id)
		}
		for _, sa := range saz.ServiceAccounts {
			a.Authn.add(cfg.ServiceAccountIdentity(sa.Namespace, sa.Name))
		}
		if len(a.Authn.Identities)+len(a.Authn.Suffixes) == 0 {
			return a, fmt.Errorf("authorizes no clients")
		}
	}
	return a, nil
}

// add adds an identity string: "*" matches all, "*.a.b" every identity under a.b.
func (an *authn) add(id string) {
	switch {
	case id == "*":
		an.Suffixes = append(an.Suffixes, []string{})
	case strings.HasPrefix(id, "*."):
		an.Suffixes = append(an.Suffixes, strings.Split(id[2:], "."))
	default:
		an.Identities = append(an.Identities, id)
	}
}

func policyAuthorization(cfg *Config, res *Resources, ap *AuthorizationPolicy) (authorization, error) {
	a := authorization{Ref: authzRef{Kind: authzAuthorizationPolicy, Name: ap.Name}}
	var ids *authn
	var nets []NetworkMatch
	for _, ref := range ap.Authentications {
		key := Key{ref.Namespace, ref.Name}
		switch ref.Kind {
		case AuthnMeshTLS:
			m := res.MeshTLS[key]
			if m == nil {
				return a, fmt.Errorf("MeshTLSAuthentication %s not found", key)
			}
			if ids != nil {
				return a, fmt.Errorf("policy must not require more than one MeshTLSAuthentication or ServiceAccount")
			}
			ids = &authn{Kind: permitIdentities}
			for _, id := range m.Identities {
				ids.add(id)
			}
			for _, r := range m.IdentityRefs {
				switch r.Kind {
				case IdentityRefServiceAccount:
					ids.add(cfg.ServiceAccountIdentity(r.Namespace, r.Name))
				case IdentityRefNamespace:
					ids.add("*." + cfg.NamespaceIdentitySuffix(r.Name))
				}
			}
			if len(ids.Identities)+len(ids.Suffixes) == 0 {
				return a, fmt.Errorf("MeshTLSAuthentication %s has no identities", key)
			}
		case AuthnServiceAccount:
			if ids != nil {
				return a, fmt.Errorf("policy must not require more than one MeshTLSAuthentication or ServiceAccount")
			}
			ids = &authn{Kind: permitIdentities, Identities: []string{cfg.ServiceAccountIdentity(ref.Namespace, ref.Name)}}
		case AuthnNetwork:
			n := res.Networks[key]
			if n == nil {
				return a, fmt.Errorf("NetworkAuthentication %s not found", key)
			}
			if nets != nil {
				return a, fmt.Errorf("policy must not require more than one NetworkAuthentication")
			}
			nets = n.Networks
		}
	}
	a.Authn = authn{Kind: permitUnauthenticated}
	if ids != nil {
		a.Authn = *ids
	}
	a.Networks = nets
	if nets == nil {
		a.Networks = allNetworks
	}
	return a, nil
}
