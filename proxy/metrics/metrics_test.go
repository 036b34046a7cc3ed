package metrics

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/meridian-mesh/meridian/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.Main(m, nil)) }

func TestLinkerdNamesAndLabels(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	l := Labels{Direction: "outbound", Authority: "web.shop.svc.cluster.local:8080", TLS: TLSTrue,
		ServerID: "web.shop.serviceaccount.identity.linkerd.cluster.local",
		Dst:      map[string]string{"namespace": "shop", "service": "web", "pod": "web-0", "unknown": "dropped"}}
	r := m.Route(l)
	if m.Route(l) != r {
		t.Error("Route is not cached")
	}
	r.Request()
	r.Response(200, "", false, 12*time.Millisecond)
	r.Response(503, "", true, time.Millisecond)
	c := m.TCP(l)
	c.Open()
	c.Read(10)
	c.Wrote(20)
	c.Close(false)
	m.HTTPAuthz(false, Authz{SrvName: "web-http", TLS: TLSNoIdentity})

	want := `
# HELP request_total Total count of HTTP requests.
# TYPE request_total counter
request_total{authority="web.shop.svc.cluster.local:8080",client_id="",direction="outbound",dst_control_plane_ns="",dst_daemonset="",dst_deployment="",dst_namespace="shop",dst_pod="web-0",dst_pod_template_hash="",dst_service="web",dst_serviceaccount="",dst_statefulset="",dst_zone="",server_id="web.shop.serviceaccount.identity.linkerd.cluster.local",srv_name="",tls="true"} 1
`
	if err := promtest.GatherAndCompare(reg, strings.NewReader(want), "request_total"); err != nil {
		t.Error(err)
	}
	for name, n := range map[string]int{"response_total": 2, "response_latency_ms": 2, "tcp_open_total": 1, "tcp_open_connections": 1,
		"tcp_read_bytes_total": 1, "tcp_write_bytes_total": 1, "tcp_close_total": 2, "inbound_http_authz_deny_total": 1} {
		if got := promtest.CollectAndCount(collector(m, name), name); got != n {
			t.Errorf("%s: %d series, want %d", name, got, n)
		}
	}
	if v := promtest.ToFloat64(m.tcpOpenConns.WithLabelValues(l.values()...)); v != 0 {
		t.Errorf("tcp_open_connections after close = %v", v)
	}
}

func collector(m *Metrics, name string) prometheus.Collector {
	return map[string]prometheus.Collector{"response_total": m.responses, "response_latency_ms": m.latency, "tcp_open_total": m.tcpOpen,
		"tcp_open_connections": m.tcpOpenConns, "tcp_read_bytes_total": m.tcpRead, "tcp_write_bytes_total": m.tcpWrite,
		"tcp_close_total": m.tcpClose, "inbound_http_authz_deny_total": m.httpDeny}[name]
}

func BenchmarkRouteResponse(b *testing.B) {
	m := New(nil)
	l := Labels{Direction: "outbound", Authority: "web.shop.svc.cluster.local:8080", TLS: TLSTrue, Dst: map[string]string{"pod": "web-0"}}
	r := m.Route(l)
	b.ReportAllocs()
	for b.Loop() {
		r.Request()
		r.Response(200, "", false, time.Millisecond)
	}
}

// TestAuthorityBounded: the authority label, which a client chooses, cannot grow the series
// without bound: one too long for a DNS name reads "invalid", and new ones beyond the route
// bound read "other", while the routes already counted keep their own.
func TestAuthorityBounded(t *testing.T) {
	m := New(nil)
	m.maxRoutes = 3
	route := func(authority string) string {
		return m.Route(Labels{Direction: "inbound", Authority: authority, TLS: TLSNoIdentity}).values[1]
	}
	if got := route(strings.Repeat("h", 16<<10)); got != AuthorityInvalid {
		t.Errorf("a 16 KiB authority reads %.40q, want %q", got, AuthorityInvalid)
	}
	for _, a := range []string{"a:80", "b:80"} {
		if got := route(a); got != a {
			t.Errorf("%s reads %q", a, got)
		}
	}
	for i := range 100 {
		if got := route(fmt.Sprintf("flood-%d:80", i)); got != AuthorityOther {
			t.Fatalf("authority %d beyond the bound reads %q, want %q", i, got, AuthorityOther)
		}
	}
	if got := route("a:80"); got != "a:80" {
		t.Errorf("a route counted before the bound reads %q", got)
	}
	if n := m.routes.n.Load(); n > 4 {
		t.Errorf("%d routes with series, want at most the bound and %q", n, AuthorityOther)
	}
	// Pods' names (dst_pod) beyond the bound do not make series either, nor do connections.
	for i := range 100 {
		l := Labels{Direction: "outbound", Authority: fmt.Sprintf("c-%d:80", i), TLS: TLSTrue, Dst: map[string]string{"pod": fmt.Sprintf("web-%d", i)}}
		m.Route(l)
		m.TCP(l)
	}
	if r, c := m.routes.n.Load(), m.conns.n.Load(); r > 5 || c > 4 {
		t.Errorf("%d routes and %d kinds of connection with series, want at most the bound and the overflow's", r, c)
	}
}
