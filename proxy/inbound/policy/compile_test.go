package policy

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	httproute "github.com/linkerd/linkerd2-proxy-api/go/http_route"
	"github.com/linkerd/linkerd2-proxy-api/go/inbound"
	"github.com/linkerd/linkerd2-proxy-api/go/meta"
	pnet "github.com/linkerd/linkerd2-proxy-api/go/net"
	"github.com/meridian-mesh/meridian/proxy/internal/proxytest"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
)

var (
	podAddr      = netip.MustParseAddr("10.1.2.3")
	outsideAddr  = netip.MustParseAddr("8.8.8.8")
	plainClient  = Client{Addr: podAddr}
	tlsAnonymous = Client{Addr: podAddr, TLS: true}
	fromGateway  = Client{Addr: podAddr, TLS: true, Identity: gatewayID}
	fromWeb      = Client{Addr: podAddr, TLS: true, Identity: webID}
	fromLoopback = Client{Addr: netip.MustParseAddr("127.0.0.1")}
)

func authzName(a *Authz) string {
	if a == nil {
		return "<denied>"
	}
	return a.Name
}

func request(method, target string) *http.Request {
	return httptest.NewRequest(method, target, nil)
}

// TestControllerPolicies compiles what Meridian's policy controller sends for the seed mesh
// and evaluates it as linkerd2-proxy would.
func TestControllerPolicies(t *testing.T) {
	idx := proxytest.NewPolicyIndex(t, seedYAML(t))

	web, err := Compile(controllerPolicy(t, idx, "web-0", 8080))
	if err != nil {
		t.Fatal(err)
	}
	if web.Name != "web-http" || web.Kind != "server" || web.Protocol != HTTP1 {
		t.Fatalf("web-0:8080 = %s %s %v", web.Kind, web.Name, web.Protocol)
	}
	for _, tc := range []struct {
		method, path string
		client       Client
		route, authz string
	}{
		{"GET", "/healthz", plainClient, "probe", "probe"},
		{"GET", "/ready", Client{Addr: outsideAddr}, "probe", "probe"},
		{"POST", "/healthz", plainClient, "default", "<denied>"},
		{"GET", "/healthz/x", plainClient, "default", "<denied>"},
		{"GET", "/api", plainClient, "default", "<denied>"},
		{"GET", "/api", tlsAnonymous, "default", "<denied>"},
		{"GET", "/api", fromWeb, "default", "<denied>"},
		{"GET", "/api", fromGateway, "default", "web-from-gateway"},
		{"GET", "/api", fromLoopback, "default", "localhost"},
	} {
		rt := web.Route(request(tc.method, tc.path))
		if rt == nil {
			t.Errorf("%s %s: no route", tc.method, tc.path)
			continue
		}
		if got := authzName(rt.Authorize(tc.client)); rt.Name != tc.route || got != tc.authz {
			t.Errorf("%s %s from %+v: route %s authz %s; want %s %s", tc.method, tc.path, tc.client, rt.Name, got, tc.route, tc.authz)
		}
	}
	if got := authzName(web.AuthorizeTCP(plainClient)); got != "<denied>" {
		t.Errorf("TCP plaintext on web-http: %s", got)
	}
	if got := authzName(web.AuthorizeTCP(fromGateway)); got != "web-from-gateway" {
		t.Errorf("TCP from the gateway on web-http: %s", got)
	}

	// A port without a Server: the cluster default, all-unauthenticated, detecting.
	admin, err := Compile(controllerPolicy(t, idx, "web-0", 9000))
	if err != nil {
		t.Fatal(err)
	}
	if admin.Name != "all-unauthenticated" || admin.Kind != "default" || admin.Protocol != Detect || admin.DetectTimeout != 10*time.Second {
		t.Fatalf("web-0:9000 = %+v", admin)
	}
	if got := authzName(admin.AuthorizeTCP(Client{Addr: outsideAddr})); got != "all-unauthenticated" {
		t.Errorf("TCP on the default port: %s", got)
	}

	// The gateway's annotation: cluster-authenticated.
	gw, err := Compile(controllerPolicy(t, idx, "api-gateway-0", 8080))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		c    Client
		want string
	}{
		{fromWeb, "cluster-authenticated"},
		{plainClient, "<denied>"},
		{tlsAnonymous, "<denied>"},
		{Client{Addr: outsideAddr, TLS: true, Identity: webID}, "<denied>"},
		{Client{Addr: netip.MustParseAddr("::ffff:10.1.2.3"), TLS: true, Identity: webID}, "cluster-authenticated"},
	} {
		if got := authzName(gw.Route(request("GET", "/")).Authorize(tc.c)); got != tc.want {
			t.Errorf("gateway from %+v: %s, want %s", tc.c, got, tc.want)
		}
	}
}

func TestDefaults(t *testing.T) {
	for _, tc := range []struct {
		name                   string
		plain, outside, tlsWeb string
	}{
		{"deny", "<denied>", "<denied>", "<denied>"},
		{"all-unauthenticated", "all-unauthenticated", "all-unauthenticated", "all-unauthenticated"},
		{"audit", "audit", "audit", "audit"},
		{"all-authenticated", "<denied>", "<denied>", "all-authenticated"},
		{"cluster-unauthenticated", "cluster-unauthenticated", "<denied>", "cluster-unauthenticated"},
		{"cluster-authenticated", "<denied>", "<denied>", "cluster-authenticated"},
	} {
		s := mustDefault(t, tc.name)
		if s.Name != tc.name || s.Kind != "default" || s.Protocol != Detect {
			t.Errorf("%s: %+v", tc.name, s)
		}
		got := []string{authzName(s.AuthorizeTCP(plainClient)), authzName(s.AuthorizeTCP(Client{Addr: outsideAddr})), authzName(s.AuthorizeTCP(fromWeb))}
		if got[0] != tc.plain || got[1] != tc.outside || got[2] != tc.tlsWeb {
			t.Errorf("%s: TCP %v", tc.name, got)
		}
		if rt := s.Route(request("GET", "/x")); rt == nil || authzName(rt.Authorize(plainClient)) != tc.plain {
			t.Errorf("%s: HTTP route %v", tc.name, rt)
		}
	}
	if _, err := Default("allow", nil, time.Second); err == nil || !strings.Contains(err.Error(), "want one of") {
		t.Errorf("Default(allow): %v", err)
	}
	if _, err := Default("cluster-authenticated", nil, time.Second); err == nil {
		t.Error("cluster-authenticated without cluster networks built")
	}
	if inv := Invalid(time.Second); inv.AuthorizeTCP(fromLoopback) != nil || inv.Route(request("GET", "/")).Authorize(fromLoopback) != nil {
		t.Error("the invalid policy authorizes")
	}
}

func ipv4Net(s string) *pnet.IPNetwork {
	p := netip.MustParsePrefix(s)
	b := p.Addr().As4()
	return &pnet.IPNetwork{Ip: &pnet.IPAddress{Ip: &pnet.IPAddress_Ipv4{Ipv4: uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])}}, PrefixLen: uint32(p.Bits())}
}

func unauthAuthz(name string, nets ...*inbound.Network) *inbound.Authz {
	return &inbound.Authz{
		Metadata:       &meta.Metadata{Kind: &meta.Metadata_Default{Default: name}},
		Networks:       nets,
		Authentication: &inbound.Authn{Permit: &inbound.Authn_Unauthenticated{Unauthenticated: &inbound.Authn_PermitUnauthenticated{}}},
	}
}

func validServer() *inbound.Server {
	return &inbound.Server{
		Protocol: &inbound.ProxyProtocol{Kind: &inbound.ProxyProtocol_Detect_{Detect: &inbound.ProxyProtocol_Detect{Timeout: durationpb.New(time.Second)}}},
		Authorizations: []*inbound.Authz{unauthAuthz("ok", &inbound.Network{Net: ipv4Net("10.0.0.0/8"),
			Except: []*pnet.IPNetwork{ipv4Net("10.9.0.0/16")}})},
		Labels: map[string]string{"kind": "server", "name": "srv"},
	}
}

func TestCompileRejects(t *testing.T) {
	if _, err := Compile(validServer()); err != nil {
		t.Fatalf("valid server: %v", err)
	}
	for name, mod := range map[string]func(s *inbound.Server){
		"no protocol":        func(s *inbound.Server) { s.Protocol = nil },
		"no detect timeout":  func(s *inbound.Server) { s.Protocol.GetDetect().Timeout = nil },
		"negative timeout":   func(s *inbound.Server) { s.Protocol.GetDetect().Timeout = durationpb.New(-time.Second) },
		"no name":            func(s *inbound.Server) { s.Labels = nil },
		"authz no networks":  func(s *inbound.Server) { s.Authorizations[0].Networks = nil },
		"authz no authn":     func(s *inbound.Server) { s.Authorizations[0].Authentication = nil },
		"authz no name":      func(s *inbound.Server) { s.Authorizations[0].Metadata = nil },
		"network no address": func(s *inbound.Server) { s.Authorizations[0].Networks[0].Net = &pnet.IPNetwork{} },
		"prefix too long":    func(s *inbound.Server) { s.Authorizations[0].Networks[0].Net.PrefixLen = 33 },
		"route no metadata": func(s *inbound.Server) {
			s.Protocol.GetDetect().HttpRoutes = []*inbound.HttpRoute{{Rules: []*inbound.HttpRoute_Rule{{}}}}
		},
		"route bad path regex": func(s *inbound.Server) {
			s.Protocol.GetDetect().HttpRoutes = []*inbound.HttpRoute{routeWith(pathRegex("(("))}
		},
		"route bad header": func(s *inbound.Server) {
			s.Protocol.GetDetect().HttpRoutes = []*inbound.HttpRoute{routeWith(&httproute.HttpRouteMatch{Headers: []*httproute.HeaderMatch{{Name: "a b"}}})}
		},
		"route empty host": func(s *inbound.Server) {
			s.Protocol.GetDetect().HttpRoutes = []*inbound.HttpRoute{{Metadata: defaultMeta("r"), Hosts: []*httproute.HostMatch{{}}}}
		},
	} {
		s := validServer()
		mod(s)
		if _, err := Compile(s); err == nil {
			t.Errorf("%s: compiled", name)
		}
	}
	s, _ := Compile(validServer())
	for addr, want := range map[string]bool{"10.1.1.1": true, "10.9.1.1": false, "11.0.0.1": false, "127.0.0.1": true} {
		if got := s.AuthorizeTCP(Client{Addr: netip.MustParseAddr(addr)}) != nil; got != want {
			t.Errorf("network with exception, %s: %v", addr, got)
		}
	}
}

func defaultMeta(name string) *meta.Metadata {
	return &meta.Metadata{Kind: &meta.Metadata_Default{Default: name}}
}

func pathRegex(re string) *httproute.HttpRouteMatch {
	return &httproute.HttpRouteMatch{Path: &httproute.PathMatch{Kind: &httproute.PathMatch_Regex{Regex: re}}}
}

func routeWith(ms ...*httproute.HttpRouteMatch) *inbound.HttpRoute {
	return &inbound.HttpRoute{Metadata: defaultMeta("r"), Rules: []*inbound.HttpRoute_Rule{{Matches: ms}}}
}

// FuzzCompile: any message the service could send compiles or is refused, and a compiled
// policy evaluates, without panicking.
func FuzzCompile(f *testing.F) {
	seed, _ := proto.Marshal(validServer())
	f.Add(seed)
	idx := proxytest.NewPolicyIndex(f, seedYAML(f))
	for _, port := range []uint32{8080, 9000} {
		b, _ := proto.Marshal(controllerPolicy(f, idx, "web-0", port))
		f.Add(b)
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		var pb inbound.Server
		if proto.Unmarshal(data, &pb) != nil {
			return
		}
		s, err := Compile(&pb)
		if err != nil {
			return
		}
		for _, c := range []Client{plainClient, fromGateway, fromLoopback, {}} {
			s.AuthorizeTCP(c)
			for _, r := range []*http.Request{request("GET", "/"), request("POST", "http://a.b/x/y?q=1"), request("GET", "/healthz")} {
				if rt := s.Route(r); rt != nil {
					rt.Authorize(c)
				}
			}
		}
	})
}
