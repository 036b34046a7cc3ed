package policy

import (
	"net/http"
	"testing"
	"time"

	grpcroute "github.com/linkerd/linkerd2-proxy-api/go/grpc_route"
	httproute "github.com/linkerd/linkerd2-proxy-api/go/http_route"
	httptypes "github.com/linkerd/linkerd2-proxy-api/go/http_types"
	"github.com/linkerd/linkerd2-proxy-api/go/inbound"
	"google.golang.org/protobuf/types/known/durationpb"
)

func namedRoute(name string, hosts []*httproute.HostMatch, ms ...*httproute.HttpRouteMatch) *inbound.HttpRoute {
	return &inbound.HttpRoute{Metadata: defaultMeta(name), Hosts: hosts, Rules: []*inbound.HttpRoute_Rule{{Matches: ms}}}
}

func pathPrefix(p string) *httproute.PathMatch {
	return &httproute.PathMatch{Kind: &httproute.PathMatch_Prefix{Prefix: p}}
}

func exact(p string) *httproute.PathMatch {
	return &httproute.PathMatch{Kind: &httproute.PathMatch_Exact{Exact: p}}
}

func hostExact(h string) *httproute.HostMatch {
	return &httproute.HostMatch{Match: &httproute.HostMatch_Exact{Exact: h}}
}

func hostSuffix(reversed ...string) *httproute.HostMatch {
	return &httproute.HostMatch{Match: &httproute.HostMatch_Suffix_{Suffix: &httproute.HostMatch_Suffix{ReverseLabels: reversed}}}
}

func TestHTTPRouteMatching(t *testing.T) {
	get := &httptypes.HttpMethod{Type: &httptypes.HttpMethod_Registered_{Registered: httptypes.HttpMethod_GET}}
	routes := []*inbound.HttpRoute{
		namedRoute("root", nil, &httproute.HttpRouteMatch{Path: pathPrefix("/")}),
		namedRoute("foo", nil, &httproute.HttpRouteMatch{Path: pathPrefix("/foo/")}),
		namedRoute("foo-bar", nil, &httproute.HttpRouteMatch{Path: exact("/foo/bar")}),
		namedRoute("get-foo", nil, &httproute.HttpRouteMatch{Path: pathPrefix("/foo"), Method: get}),
		namedRoute("num", nil, &httproute.HttpRouteMatch{Path: &httproute.PathMatch{Kind: &httproute.PathMatch_Regex{Regex: `/n/\d+`}}}),
		namedRoute("hdr", nil, &httproute.HttpRouteMatch{Path: pathPrefix("/h"), Headers: []*httproute.HeaderMatch{
			{Name: "x-canary", Value: &httproute.HeaderMatch_Exact{Exact: []byte("1")}}}}),
		namedRoute("query", nil, &httproute.HttpRouteMatch{Path: pathPrefix("/h"), QueryParams: []*httproute.QueryParamMatch{
			{Name: "v", Value: &httproute.QueryParamMatch_Regex{Regex: "[0-9]+"}}}}),
		namedRoute("host", []*httproute.HostMatch{hostExact("api.example.com")}, &httproute.HttpRouteMatch{Path: pathPrefix("/")}),
		namedRoute("wild", []*httproute.HostMatch{hostSuffix("com", "example")}, &httproute.HttpRouteMatch{Path: pathPrefix("/")}),
	}
	s, err := Compile(&inbound.Server{
		Protocol: &inbound.ProxyProtocol{Kind: &inbound.ProxyProtocol_Http1_{Http1: &inbound.ProxyProtocol_Http1{Routes: routes}}},
		Labels:   map[string]string{"name": "srv"},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		method, target string
		header         string
		want           string
	}{
		{"POST", "http://x/", "", "root"},
		{"POST", "http://x/foobar", "", "root"}, // a prefix ends at a segment
		{"POST", "http://x/foo", "", "foo"},
		{"POST", "http://x/foo/baz", "", "foo"},
		{"GET", "http://x/foo/baz", "", "get-foo"}, // same length: the method wins
		{"POST", "http://x/foo/bar", "", "foo-bar"},
		{"GET", "http://x/foo/bar", "", "foo-bar"}, // the longer path wins over the method
		{"POST", "http://x/n/42", "", "num"},
		{"POST", "http://x/n/42x", "", "root"},
		{"POST", "http://x/h", "", "root"},
		{"POST", "http://x/h", "1", "hdr"},
		{"POST", "http://x/h?v=12", "", "query"},
		{"POST", "http://x/h?v=a", "", "root"},
		{"POST", "http://x/h?v=12", "1", "hdr"}, // headers before query parameters
		{"POST", "http://API.example.com:8080/foo/bar", "", "host"},
		{"POST", "http://a.example.com./foo", "", "wild"},
		{"POST", "http://example.com/", "", "root"}, // a suffix needs a label before it
	} {
		r := request(tc.method, tc.target)
		if tc.header != "" {
			r.Header.Set("X-Canary", tc.header)
		}
		rt := s.Route(r)
		if rt == nil || rt.Name != tc.want {
			t.Errorf("%s %s (%q): %v, want %s", tc.method, tc.target, tc.header, rt, tc.want)
		}
	}

	// No route at all for a request: nil (404).
	only, _ := Compile(&inbound.Server{
		Protocol: &inbound.ProxyProtocol{Kind: &inbound.ProxyProtocol_Http2_{Http2: &inbound.ProxyProtocol_Http2{
			Routes: []*inbound.HttpRoute{namedRoute("a", nil, &httproute.HttpRouteMatch{Path: exact("/a")})}}}},
		Labels: map[string]string{"name": "srv"},
	})
	if rt := only.Route(request("GET", "/b")); rt != nil {
		t.Errorf("unmatched request routed to %s", rt.Name)
	}
}

func TestGRPCRouteMatching(t *testing.T) {
	rule := func(name, svc, method string) *inbound.GrpcRoute {
		return &inbound.GrpcRoute{Metadata: defaultMeta(name), Rules: []*inbound.GrpcRoute_Rule{{
			Matches: []*grpcroute.GrpcRouteMatch{{Rpc: &grpcroute.GrpcRpcMatch{Service: svc, Method: method}}}}}}
	}
	s, err := Compile(&inbound.Server{
		Protocol: &inbound.ProxyProtocol{Kind: &inbound.ProxyProtocol_Grpc_{Grpc: &inbound.ProxyProtocol_Grpc{Routes: []*inbound.GrpcRoute{
			rule("any", "", ""), rule("health", "grpc.health.v1.Health", ""), rule("check", "grpc.health.v1.Health", "Check"),
		}}}},
		Labels: map[string]string{"name": "srv"},
	})
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{
		"/grpc.health.v1.Health/Check": "check", "/grpc.health.v1.Health/Watch": "health", "/echo.Echo/Say": "any", "/nope": "",
	} {
		rt := s.Route(request(http.MethodPost, path))
		if got := ""; rt != nil {
			got = rt.Name
			if got != want {
				t.Errorf("%s: %s, want %s", path, got, want)
			}
		} else if want != "" {
			t.Errorf("%s: no route, want %s", path, want)
		}
	}
	if rt := s.Route(request(http.MethodGet, "/grpc.health.v1.Health/Check")); rt != nil {
		t.Errorf("GET matched gRPC route %s", rt.Name)
	}
}

func TestFiltersAnswer500(t *testing.T) {
	s, err := Compile(&inbound.Server{
		Protocol: &inbound.ProxyProtocol{Kind: &inbound.ProxyProtocol_Detect_{Detect: &inbound.ProxyProtocol_Detect{
			Timeout: durationpb.New(time.Second),
			HttpRoutes: []*inbound.HttpRoute{{Metadata: defaultMeta("f"), Rules: []*inbound.HttpRoute_Rule{{
				Filters: []*inbound.HttpRoute_Filter{{Kind: &inbound.HttpRoute_Filter_FailureInjector{FailureInjector: &httproute.HttpFailureInjector{Status: 503}}}},
			}}}},
		}}},
		Labels: map[string]string{"name": "srv"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if rt := s.Route(request("GET", "/")); rt == nil || rt.Error == "" {
		t.Fatalf("a rule with filters: %+v", rt)
	}
}

func TestHostOnly(t *testing.T) {
	for in, want := range map[string]string{"a.b": "a.b", "a.b:80": "a.b", "[::1]:80": "::1", "::1": "::1", "[::1": "[::1", "": ""} {
		if got := hostOnly(in); got != want {
			t.Errorf("hostOnly(%q) = %q, want %q", in, got, want)
		}
	}
}
