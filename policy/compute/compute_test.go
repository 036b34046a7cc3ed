package compute

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	grpcroute "github.com/linkerd/linkerd2-proxy-api/go/grpc_route"
	httproute "github.com/linkerd/linkerd2-proxy-api/go/http_route"
	httptypes "github.com/linkerd/linkerd2-proxy-api/go/http_types"
	"github.com/linkerd/linkerd2-proxy-api/go/inbound"
	"github.com/linkerd/linkerd2-proxy-api/go/meta"
	pnet "github.com/linkerd/linkerd2-proxy-api/go/net"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"k8s.io/apimachinery/pkg/labels"
)

// Expected protos are written out by hand below (not with the package's builders), so a
// mistake in proto.go shows up as a difference.

const ns = "shop"

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func cfg() *Config {
	c := DefaultConfig()
	c.ClusterNetworks = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8")}
	return &c
}

func webPod(mut ...func(*Pod)) *Pod {
	p := &Pod{
		Namespace: ns, Name: "web-0",
		Labels:    map[string]string{"app": "web", "tier": "front"},
		PortNames: map[string][]uint32{"http": {8080}, "admin": {9000, 9001}},
		Probes:    map[uint32][]string{8080: {"/healthz", "/ready"}},
	}
	for _, m := range mut {
		m(p)
	}
	return p
}

func sel(s string) labels.Selector {
	l, err := labels.Parse(s)
	if err != nil {
		panic(err)
	}
	return l
}

func webServer(mut ...func(*Server)) *Server {
	s := &Server{
		Namespace: ns, Name: "web-http", Created: t0,
		Labels:       map[string]string{"team": "web"},
		PodSelector:  sel("app=web"),
		Port:         PortRef{Name: "http"},
		Protocol:     ProtocolHTTP1,
		AccessPolicy: Deny,
	}
	for _, m := range mut {
		m(s)
	}
	return s
}

// --- expected-proto helpers ---

func v4(a, b, c, d byte, bits uint32) *pnet.IPNetwork {
	return &pnet.IPNetwork{Ip: &pnet.IPAddress{Ip: &pnet.IPAddress_Ipv4{Ipv4: uint32(a)<<24 | uint32(b)<<16 | uint32(c)<<8 | uint32(d)}}, PrefixLen: bits}
}

func v6(first, last uint64, bits uint32) *pnet.IPNetwork {
	return &pnet.IPNetwork{Ip: &pnet.IPAddress{Ip: &pnet.IPAddress_Ipv6{Ipv6: &pnet.IPv6{First: first, Last: last}}}, PrefixLen: bits}
}

func nets(ns ...*pnet.IPNetwork) []*inbound.Network {
	var out []*inbound.Network
	for _, n := range ns {
		out = append(out, &inbound.Network{Net: n})
	}
	return out
}

var (
	everywhere = func() []*inbound.Network { return nets(v4(0, 0, 0, 0, 0), v6(0, 0, 0)) }
	clusterNet = func() []*inbound.Network { return nets(v4(10, 0, 0, 0, 8), v6(0xfd00<<48, 0, 8)) }
)

func unauth() *inbound.Authn {
	return &inbound.Authn{Permit: &inbound.Authn_Unauthenticated{Unauthenticated: &inbound.Authn_PermitUnauthenticated{}}}
}

func tlsUnauth() *inbound.Authn {
	return &inbound.Authn{Permit: &inbound.Authn_MeshTLS{MeshTLS: &inbound.Authn_PermitMeshTLS{
		Clients: &inbound.Authn_PermitMeshTLS_Unauthenticated{Unauthenticated: &inbound.Authn_PermitUnauthenticated{}}}}}
}

func mtls(ids []string, suffixes ...[]string) *inbound.Authn {
	c := &inbound.Authn_PermitMeshTLS_PermitClientIdentities{}
	for _, id := range ids {
		c.Identities = append(c.Identities, &inbound.Identity{Name: id})
	}
	for _, s := range suffixes {
		c.Suffixes = append(c.Suffixes, &inbound.IdentitySuffix{Parts: s})
	}
	return &inbound.Authn{Permit: &inbound.Authn_MeshTLS{MeshTLS: &inbound.Authn_PermitMeshTLS{
		Clients: &inbound.Authn_PermitMeshTLS_Identities{Identities: c}}}}
}

func defAuthz(name string, n []*inbound.Network, a *inbound.Authn) *inbound.Authz {
	return &inbound.Authz{
		Networks: n, Authentication: a,
		Labels:   map[string]string{"group": "", "kind": "default", "name": name},
		Metadata: &meta.Metadata{Kind: &meta.Metadata_Default{Default: name}},
	}
}

func resAuthz(kind, name string, n []*inbound.Network, a *inbound.Authn) *inbound.Authz {
	return &inbound.Authz{
		Networks: n, Authentication: a,
		Labels:   map[string]string{"group": "policy.linkerd.io", "kind": kind, "name": name},
		Metadata: &meta.Metadata{Kind: &meta.Metadata_Resource{Resource: &meta.Resource{Group: "policy.linkerd.io", Kind: kind, Name: name}}},
	}
}

func routes(probes ...string) []*inbound.HttpRoute {
	rs := []*inbound.HttpRoute{{
		Metadata: &meta.Metadata{Kind: &meta.Metadata_Default{Default: "default"}},
		Rules: []*inbound.HttpRoute_Rule{{Matches: []*httproute.HttpRouteMatch{{
			Path: &httproute.PathMatch{Kind: &httproute.PathMatch_Prefix{Prefix: "/"}},
		}}}},
	}}
	if len(probes) == 0 {
		return rs
	}
	var ms []*httproute.HttpRouteMatch
	for _, p := range probes {
		ms = append(ms, &httproute.HttpRouteMatch{
			Path:   &httproute.PathMatch{Kind: &httproute.PathMatch_Exact{Exact: p}},
			Method: &httptypes.HttpMethod{Type: &httptypes.HttpMethod_Registered_{Registered: httptypes.HttpMethod_GET}},
		})
	}
	return append(rs, &inbound.HttpRoute{
		Metadata:       &meta.Metadata{Kind: &meta.Metadata_Default{Default: "probe"}},
		Rules:          []*inbound.HttpRoute_Rule{{Matches: ms}},
		Authorizations: []*inbound.Authz{defAuthz("probe", everywhere(), unauth())},
	})
}

func detect(r []*inbound.HttpRoute) *inbound.ProxyProtocol {
	return &inbound.ProxyProtocol{Kind: &inbound.ProxyProtocol_Detect_{Detect: &inbound.ProxyProtocol_Detect{
		Timeout: durationpb.New(10 * time.Second), HttpRoutes: r}}}
}

func http1(r []*inbound.HttpRoute) *inbound.ProxyProtocol {
	return &inbound.ProxyProtocol{Kind: &inbound.ProxyProtocol_Http1_{Http1: &inbound.ProxyProtocol_Http1{Routes: r}}}
}

func defaultServerProto(policy string, p *inbound.ProxyProtocol, authz ...*inbound.Authz) *inbound.Server {
	return &inbound.Server{Protocol: p, Authorizations: authz,
		Labels: map[string]string{"group": "", "kind": "default", "name": policy}}
}

func namedServerProto(name string, p *inbound.ProxyProtocol, authz ...*inbound.Authz) *inbound.Server {
	return &inbound.Server{Protocol: p, Authorizations: authz,
		Labels: map[string]string{"group": "policy.linkerd.io", "kind": "server", "name": name}}
}

const gatewayID = "api-gateway.shop.serviceaccount.identity.linkerd.cluster.local"

// inboundCase is one Inbound call (with cfg adjusted by cfg when set) and what it must
// return.
type inboundCase struct {
	name      string
	pod       *Pod
	port      uint32
	res       Resources
	cfg       func(*Config)
	want      *inbound.Server
	server    string
	conflicts []string
	ignored   int
}

func TestInbound(t *testing.T) {
	for _, tc := range slices.Concat(serverSelectionCases(), defaultPolicyCases(), authorizationCases(), serverAuthorizationCases(), protocolCases()) {
		t.Run(tc.name, func(t *testing.T) {
			c := cfg()
			if tc.cfg != nil {
				tc.cfg(c)
			}
			got := Inbound(c, &tc.res, tc.pod, tc.port)
			if !proto.Equal(got.Server, tc.want) {
				t.Errorf("server mismatch\n got: %s\nwant: %s", prototext.Format(got.Server), prototext.Format(tc.want))
			}
			if got.ServerName != tc.server {
				t.Errorf("ServerName = %q, want %q", got.ServerName, tc.server)
			}
			if len(got.Conflicts) != len(tc.conflicts) {
				t.Fatalf("Conflicts = %v, want %v", got.Conflicts, tc.conflicts)
			}
			for i := range got.Conflicts {
				if got.Conflicts[i] != tc.conflicts[i] {
					t.Errorf("Conflicts = %v, want %v", got.Conflicts, tc.conflicts)
				}
			}
			if len(got.Ignored) != tc.ignored {
				t.Errorf("Ignored = %q, want %d entries", got.Ignored, tc.ignored)
			}
		})
	}
}

// serverSelectionCases: which Server, if any, selects the pod's port.
func serverSelectionCases() []inboundCase {
	return []inboundCase{
		{
			name: "deny server without authorization denies (probes still allowed)",
			pod:  webPod(), port: 8080,
			res:    Resources{Servers: []*Server{webServer()}},
			server: "web-http",
			want:   namedServerProto("web-http", http1(routes("/healthz", "/ready"))),
		},
		{
			name: "server selecting by number",
			pod:  webPod(), port: 8080,
			res:    Resources{Servers: []*Server{webServer(func(s *Server) { s.Port = PortRef{Number: 8080} })}},
			server: "web-http",
			want:   namedServerProto("web-http", http1(routes("/healthz", "/ready"))),
		},
		{
			name: "named port with two numbers selects both",
			pod:  webPod(), port: 9001,
			res: Resources{Servers: []*Server{webServer(func(s *Server) {
				s.Name, s.Port, s.Protocol, s.AccessPolicy = "admin", PortRef{Name: "admin"}, ProtocolOpaque, AllUnauthenticated
			})}},
			server: "admin",
			want: namedServerProto("admin", &inbound.ProxyProtocol{Kind: &inbound.ProxyProtocol_Opaque_{Opaque: &inbound.ProxyProtocol_Opaque{}}},
				defAuthz("all-unauthenticated", everywhere(), unauth())),
		},
		{
			name: "selector mismatch falls back to the default",
			pod:  webPod(), port: 8080,
			res:  Resources{Servers: []*Server{webServer(func(s *Server) { s.PodSelector = sel("app=api") })}},
			want: defaultServerProto("all-unauthenticated", detect(routes("/healthz", "/ready")), defAuthz("all-unauthenticated", everywhere(), unauth())),
		},
		{
			name: "named port absent from pod falls back to the default",
			pod:  webPod(), port: 8080,
			res:  Resources{Servers: []*Server{webServer(func(s *Server) { s.Port = PortRef{Name: "grpc"} })}},
			want: defaultServerProto("all-unauthenticated", detect(routes("/healthz", "/ready")), defAuthz("all-unauthenticated", everywhere(), unauth())),
		},
		{
			name: "server in another namespace does not select",
			pod:  webPod(), port: 8080,
			res:  Resources{Servers: []*Server{webServer(func(s *Server) { s.Namespace = "other" })}},
			want: defaultServerProto("all-unauthenticated", detect(routes("/healthz", "/ready")), defAuthz("all-unauthenticated", everywhere(), unauth())),
		},
		{
			name: "external workload server never selects a pod",
			pod:  webPod(), port: 8080,
			res:  Resources{Servers: []*Server{webServer(func(s *Server) { s.PodSelector, s.ExternalWorkloadSelector = nil, sel("app=web") })}},
			want: defaultServerProto("all-unauthenticated", detect(routes("/healthz", "/ready")), defAuthz("all-unauthenticated", everywhere(), unauth())),
		},
		{
			name: "conflict: oldest server wins, others reported",
			pod:  webPod(), port: 8080,
			res: Resources{Servers: []*Server{
				webServer(func(s *Server) { s.Name, s.Created, s.Protocol = "z-newer", t0.Add(time.Hour), ProtocolGRPC }),
				webServer(func(s *Server) { s.Name = "b-same-age" }),
				webServer(func(s *Server) { s.Name = "a-same-age" }),
			}},
			server: "a-same-age", conflicts: []string{"b-same-age", "z-newer"},
			want: namedServerProto("a-same-age", http1(routes("/healthz", "/ready"))),
		},
	}
}

// defaultPolicyCases: ports no Server selects get the default policy.
func defaultPolicyCases() []inboundCase {
	policy := func(p DefaultPolicy) func(*Pod) { return func(pod *Pod) { pod.DefaultPolicy = &p } }
	return []inboundCase{
		{name: "default all-unauthenticated (cluster default)", pod: webPod(), port: 7000,
			want: defaultServerProto("all-unauthenticated", detect(routes()), defAuthz("all-unauthenticated", everywhere(), unauth()))},
		{name: "default all-authenticated (annotation)", pod: webPod(policy(AllAuthenticated)), port: 7000,
			want: defaultServerProto("all-authenticated", detect(routes()), defAuthz("all-authenticated", everywhere(), mtls(nil, []string{})))},
		{name: "default cluster-unauthenticated", pod: webPod(policy(ClusterUnauthenticated)), port: 7000,
			want: defaultServerProto("cluster-unauthenticated", detect(routes()), defAuthz("cluster-unauthenticated", clusterNet(), unauth()))},
		{name: "default cluster-authenticated", pod: webPod(policy(ClusterAuthenticated)), port: 7000,
			want: defaultServerProto("cluster-authenticated", detect(routes()), defAuthz("cluster-authenticated", clusterNet(), mtls(nil, []string{})))},
		{name: "default deny", pod: webPod(policy(Deny)), port: 7000,
			want: defaultServerProto("deny", detect(routes()))},
		{name: "default deny keeps probes", pod: webPod(policy(Deny)), port: 8080,
			want: defaultServerProto("deny", detect(routes("/healthz", "/ready")))},
		{name: "default audit", pod: webPod(policy(Audit)), port: 7000,
			want: defaultServerProto("audit", detect(routes()), defAuthz("audit", everywhere(), unauth()))},
		{name: "cluster default from config", pod: webPod(), port: 7000,
			cfg:  func(c *Config) { c.DefaultPolicy = Deny },
			want: defaultServerProto("deny", detect(routes()))},
		{name: "annotation overrides cluster default", pod: webPod(policy(ClusterUnauthenticated)), port: 7000,
			cfg:  func(c *Config) { c.DefaultPolicy = Deny },
			want: defaultServerProto("cluster-unauthenticated", detect(routes()), defAuthz("cluster-unauthenticated", clusterNet(), unauth()))},
		{name: "require-identity port makes the default authenticated",
			pod: webPod(policy(ClusterUnauthenticated), func(p *Pod) { p.RequireIDPorts = PortSet{7000: {}} }), port: 7000,
			want: defaultServerProto("cluster-authenticated", detect(routes()), defAuthz("cluster-authenticated", clusterNet(), mtls(nil, []string{})))},
		{name: "a require-identity list that does not parse makes every default authenticated",
			pod: webPod(policy(ClusterUnauthenticated), func(p *Pod) { p.RequireIDAll = true }), port: 7000,
			want: defaultServerProto("cluster-authenticated", detect(routes()), defAuthz("cluster-authenticated", clusterNet(), mtls(nil, []string{})))},
		{name: "opaque-ports annotation makes the default opaque",
			pod: webPod(func(p *Pod) { p.OpaquePorts = PortSet{5432: {}} }), port: 5432,
			want: defaultServerProto("all-unauthenticated", &inbound.ProxyProtocol{Kind: &inbound.ProxyProtocol_Opaque_{Opaque: &inbound.ProxyProtocol_Opaque{}}},
				defAuthz("all-unauthenticated", everywhere(), unauth()))},
		{name: "no probe networks: no probe route", pod: webPod(), port: 8080,
			cfg:  func(c *Config) { c.ProbeNetworks = nil },
			want: defaultServerProto("all-unauthenticated", detect(routes()), defAuthz("all-unauthenticated", everywhere(), unauth()))},
	}
}

// webPolicy is an AuthorizationPolicy in ns for the Server web-http.
func webPolicy(name string, authns ...AuthnRef) *AuthorizationPolicy {
	return &AuthorizationPolicy{Namespace: ns, Name: name, Target: TargetServer, TargetName: "web-http", Authentications: authns}
}

// authorizationCases: AuthorizationPolicies and their authentications.
func authorizationCases() []inboundCase {
	seedPolicy := webPolicy("web-from-gateway", AuthnRef{Kind: AuthnServiceAccount, Namespace: ns, Name: "api-gateway"})
	meshTLS := map[Key]*MeshTLSAuthentication{
		{ns, "gateway-ids"}: {Namespace: ns, Name: "gateway-ids",
			Identities: []string{"*.ops.serviceaccount.identity.linkerd.cluster.local", "legacy.example"},
			IdentityRefs: []IdentityRef{
				{Kind: IdentityRefServiceAccount, Namespace: ns, Name: "api-gateway"},
				{Kind: IdentityRefNamespace, Name: "batch"},
			}},
		{"other", "everyone"}: {Namespace: "other", Name: "everyone", Identities: []string{"*"}},
	}
	networks := map[Key]*NetworkAuthentication{
		{ns, "office"}: {Namespace: ns, Name: "office", Networks: []NetworkMatch{{
			Net:    netip.MustParsePrefix("192.168.0.0/16"),
			Except: []netip.Prefix{netip.MustParsePrefix("192.168.10.0/24")},
		}}},
	}
	office := officeNets()
	return []inboundCase{
		{
			name: "seed example: deny server, policy requiring ServiceAccount api-gateway",
			pod:  webPod(), port: 8080,
			res:    Resources{Servers: []*Server{webServer()}, AuthorizationPolicies: []*AuthorizationPolicy{seedPolicy}},
			server: "web-http",
			want: namedServerProto("web-http", http1(routes("/healthz", "/ready")),
				resAuthz("authorizationpolicy", "web-from-gateway", everywhere(), mtls([]string{gatewayID}))),
		},
		{
			name: "MeshTLSAuthentication: identities, globs and identity refs",
			pod:  webPod(), port: 8080,
			res: Resources{Servers: []*Server{webServer()}, MeshTLS: meshTLS, AuthorizationPolicies: []*AuthorizationPolicy{
				webPolicy("ids", AuthnRef{Kind: AuthnMeshTLS, Namespace: ns, Name: "gateway-ids"}),
			}},
			server: "web-http",
			want: namedServerProto("web-http", http1(routes("/healthz", "/ready")),
				resAuthz("authorizationpolicy", "ids", everywhere(), mtls(
					[]string{"legacy.example", gatewayID},
					[]string{"ops", "serviceaccount", "identity", "linkerd", "cluster", "local"},
					[]string{"batch", "serviceaccount", "identity", "linkerd", "cluster", "local"}))),
		},
		{
			name: "NetworkAuthentication alone: unauthenticated from its networks",
			pod:  webPod(), port: 8080,
			res: Resources{Servers: []*Server{webServer()}, Networks: networks, AuthorizationPolicies: []*AuthorizationPolicy{
				webPolicy("office", AuthnRef{Kind: AuthnNetwork, Namespace: ns, Name: "office"}),
			}},
			server: "web-http",
			want:   namedServerProto("web-http", http1(routes("/healthz", "/ready")), resAuthz("authorizationpolicy", "office", office, unauth())),
		},
		{
			name: "all refs must match: network AND identity in one authorization",
			pod:  webPod(), port: 8080,
			res: Resources{Servers: []*Server{webServer()}, Networks: networks, MeshTLS: meshTLS, AuthorizationPolicies: []*AuthorizationPolicy{
				webPolicy("both", AuthnRef{Kind: AuthnMeshTLS, Namespace: "other", Name: "everyone"}, AuthnRef{Kind: AuthnNetwork, Namespace: ns, Name: "office"}),
			}},
			server: "web-http",
			want:   namedServerProto("web-http", http1(routes("/healthz", "/ready")), resAuthz("authorizationpolicy", "both", office, mtls(nil, []string{}))),
		},
		{
			name: "policy with a missing reference is ignored; others still authorise",
			pod:  webPod(), port: 8080,
			res: Resources{Servers: []*Server{webServer()}, Networks: networks, AuthorizationPolicies: []*AuthorizationPolicy{
				seedPolicy,
				webPolicy("broken", AuthnRef{Kind: AuthnServiceAccount, Namespace: ns, Name: "x"}, AuthnRef{Kind: AuthnNetwork, Namespace: ns, Name: "missing"}),
			}},
			server: "web-http", ignored: 1,
			want: namedServerProto("web-http", http1(routes("/healthz", "/ready")),
				resAuthz("authorizationpolicy", "web-from-gateway", everywhere(), mtls([]string{gatewayID}))),
		},
		{
			name: "two identity sources in one policy are illegal",
			pod:  webPod(), port: 8080,
			res: Resources{Servers: []*Server{webServer()}, MeshTLS: meshTLS, AuthorizationPolicies: []*AuthorizationPolicy{
				webPolicy("two", AuthnRef{Kind: AuthnServiceAccount, Namespace: ns, Name: "a"}, AuthnRef{Kind: AuthnMeshTLS, Namespace: ns, Name: "gateway-ids"}),
			}},
			server: "web-http", ignored: 1,
			want: namedServerProto("web-http", http1(routes("/healthz", "/ready"))),
		},
		{
			name: "namespace-targeted policy applies; other server's and route policies do not",
			pod:  webPod(), port: 8080,
			res: Resources{Servers: []*Server{webServer()}, AuthorizationPolicies: []*AuthorizationPolicy{
				{Namespace: ns, Name: "ns-wide", Target: TargetNamespace, TargetName: ns,
					Authentications: []AuthnRef{{Kind: AuthnServiceAccount, Namespace: ns, Name: "api-gateway"}}},
				{Namespace: ns, Name: "other-server", Target: TargetServer, TargetName: "api-http",
					Authentications: []AuthnRef{{Kind: AuthnServiceAccount, Namespace: ns, Name: "api-gateway"}}},
				{Namespace: ns, Name: "route", Target: TargetHTTPRoute, TargetName: "web-route",
					Authentications: []AuthnRef{{Kind: AuthnServiceAccount, Namespace: ns, Name: "api-gateway"}}},
				{Namespace: "other", Name: "elsewhere", Target: TargetNamespace, TargetName: "other",
					Authentications: []AuthnRef{{Kind: AuthnServiceAccount, Namespace: ns, Name: "api-gateway"}}},
			}},
			server: "web-http",
			want: namedServerProto("web-http", http1(routes("/healthz", "/ready")),
				resAuthz("authorizationpolicy", "ns-wide", everywhere(), mtls([]string{gatewayID}))),
		},
		{
			name: "server accessPolicy audit adds the audit authorization after the policies",
			pod:  webPod(), port: 8080,
			res: Resources{Servers: []*Server{webServer(func(s *Server) { s.AccessPolicy = Audit })},
				AuthorizationPolicies: []*AuthorizationPolicy{seedPolicy}},
			server: "web-http",
			want: namedServerProto("web-http", http1(routes("/healthz", "/ready")),
				resAuthz("authorizationpolicy", "web-from-gateway", everywhere(), mtls([]string{gatewayID})),
				defAuthz("audit", everywhere(), unauth())),
		},
	}
}

// officeNets is the office NetworkAuthentication's network as the proxy API carries it.
func officeNets() []*inbound.Network {
	return []*inbound.Network{{Net: v4(192, 168, 0, 0, 16), Except: []*pnet.IPNetwork{v4(192, 168, 10, 0, 24)}}}
}

// serverAuthorizationCases: the legacy ServerAuthorization resource.
func serverAuthorizationCases() []inboundCase {
	office := officeNets()
	return []inboundCase{
		{
			name: "legacy ServerAuthorization by name and by selector",
			pod:  webPod(), port: 8080,
			res: Resources{Servers: []*Server{webServer()}, ServerAuthorizations: []*ServerAuthorization{
				{Namespace: ns, Name: "c-by-selector", ServerSelector: sel("team=web"), Unauthenticated: true,
					Networks: []NetworkMatch{{Net: netip.MustParsePrefix("192.168.0.0/16"), Except: []netip.Prefix{netip.MustParsePrefix("192.168.10.0/24")}}}},
				{Namespace: ns, Name: "a-by-name", ServerName: "web-http",
					Identities: []string{"*.ops.example"}, ServiceAccounts: []Key{{ns, "api-gateway"}}},
				{Namespace: ns, Name: "b-tls", ServerName: "web-http", UnauthenticatedTLS: true},
				{Namespace: ns, Name: "d-other", ServerName: "api-http", Unauthenticated: true},
				{Namespace: ns, Name: "e-selector-miss", ServerSelector: sel("team=api"), Unauthenticated: true},
				{Namespace: ns, Name: "f-empty", ServerName: "web-http"},
			}},
			server: "web-http", ignored: 1,
			want: namedServerProto("web-http", http1(routes("/healthz", "/ready")),
				resAuthz("serverauthorization", "a-by-name", clusterNet(), mtls([]string{gatewayID}, []string{"ops", "example"})),
				resAuthz("serverauthorization", "b-tls", clusterNet(), tlsUnauth()),
				resAuthz("serverauthorization", "c-by-selector", office, unauth())),
		},
	}
}

// protocolCases: a Server's protocol picks the proxy protocol and its routes.
func protocolCases() []inboundCase {
	return []inboundCase{
		{
			name: "gRPC server gets the default gRPC route and no probe route",
			pod:  webPod(), port: 8080,
			res:    Resources{Servers: []*Server{webServer(func(s *Server) { s.Protocol = ProtocolGRPC })}},
			server: "web-http",
			want: namedServerProto("web-http", &inbound.ProxyProtocol{Kind: &inbound.ProxyProtocol_Grpc_{Grpc: &inbound.ProxyProtocol_Grpc{
				Routes: []*inbound.GrpcRoute{{
					Metadata: &meta.Metadata{Kind: &meta.Metadata_Default{Default: "default"}},
					Rules:    []*inbound.GrpcRoute_Rule{{Matches: []*grpcroute.GrpcRouteMatch{{Rpc: &grpcroute.GrpcRpcMatch{}}}}},
				}},
			}}}),
		},
		{
			name: "HTTP/2, TLS and unknown protocols",
			pod:  webPod(), port: 8080,
			res:    Resources{Servers: []*Server{webServer(func(s *Server) { s.Protocol = ProtocolHTTP2 })}},
			server: "web-http",
			want:   namedServerProto("web-http", &inbound.ProxyProtocol{Kind: &inbound.ProxyProtocol_Http2_{Http2: &inbound.ProxyProtocol_Http2{Routes: routes("/healthz", "/ready")}}}),
		},
		{
			name: "TLS",
			pod:  webPod(), port: 8080,
			res:    Resources{Servers: []*Server{webServer(func(s *Server) { s.Protocol = ProtocolTLS })}},
			server: "web-http",
			want:   namedServerProto("web-http", &inbound.ProxyProtocol{Kind: &inbound.ProxyProtocol_Tls_{Tls: &inbound.ProxyProtocol_Tls{}}}),
		},
		{
			name: "unknown protocol detects",
			pod:  webPod(), port: 8080,
			res:    Resources{Servers: []*Server{webServer(func(s *Server) { s.Protocol = ProtocolDetect })}},
			server: "web-http",
			want:   namedServerProto("web-http", detect(routes("/healthz", "/ready"))),
		},
	}
}

// Inbound is deterministic: the order of its inputs does not change its output.
func TestInboundDeterministic(t *testing.T) {
	res := Resources{
		Servers: []*Server{webServer(func(s *Server) { s.Name = "b" }), webServer(func(s *Server) { s.Name = "a" })},
		ServerAuthorizations: []*ServerAuthorization{
			{Namespace: ns, Name: "y", ServerSelector: sel(""), Unauthenticated: true},
			{Namespace: ns, Name: "x", ServerSelector: sel(""), Unauthenticated: true},
		},
	}
	first := Inbound(cfg(), &res, webPod(), 8080)
	res.Servers[0], res.Servers[1] = res.Servers[1], res.Servers[0]
	res.ServerAuthorizations[0], res.ServerAuthorizations[1] = res.ServerAuthorizations[1], res.ServerAuthorizations[0]
	second := Inbound(cfg(), &res, webPod(), 8080)
	if !proto.Equal(first.Server, second.Server) || first.ServerName != "a" || second.ServerName != "a" {
		t.Fatalf("results differ with input order:\n%s\n%s", prototext.Format(first.Server), prototext.Format(second.Server))
	}
}

func TestDefaultPolicyRoundTrip(t *testing.T) {
	for p := Deny; p <= Audit; p++ {
		got, err := ParseDefaultPolicy(p.String())
		if err != nil || got != p {
			t.Errorf("ParseDefaultPolicy(%q) = %v, %v", p.String(), got, err)
		}
	}
	if _, err := ParseDefaultPolicy("allow"); err == nil {
		t.Error("ParseDefaultPolicy(allow) succeeded")
	}
}

func BenchmarkInbound(b *testing.B) {
	res := Resources{Servers: []*Server{webServer()}}
	for i := range 50 {
		res.AuthorizationPolicies = append(res.AuthorizationPolicies,
			webPolicy("p"+string(rune('a'+i%26))+string(rune('a'+i/26)), AuthnRef{Kind: AuthnServiceAccount, Namespace: ns, Name: "sa"}))
	}
	c, pod := cfg(), webPod()
	b.ReportAllocs()
	for b.Loop() {
		Inbound(c, &res, pod, 8080)
	}
}
