package metrics

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
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
		return m.Route(Labels{Direction: "inbound", Authority: authority, TLS: TLSNoIdentity}).cur.Load().values[1]
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
	if n := m.routes[direction("inbound")].n.Load(); n > 4 {
		t.Errorf("%d routes with series, want at most the bound and %q", n, AuthorityOther)
	}
	// Pods' names (dst_pod) beyond the bound do not make series either, nor do connections.
	for i := range 100 {
		l := Labels{Direction: "outbound", Authority: fmt.Sprintf("c-%d:80", i), TLS: TLSTrue, Dst: map[string]string{"pod": fmt.Sprintf("web-%d", i)}}
		m.Route(l)
		m.TCP(l)
	}
	if r, c := m.routes[direction("outbound")].n.Load(), m.conns[direction("outbound")].n.Load(); r > 4 || c > 4 {
		t.Errorf("%d outbound routes and %d kinds of connection with series, want at most the bound and the overflow's", r, c)
	}
}

// TestLabelsNotUTF8: Prometheus panics on a label value that is not UTF-8, and a client
// chooses an inbound request's Host (HTTP/1 and HTTP/2 let bytes 0x80-0xFF through), a peer
// its grpc-status. Every such value reads "invalid" (a grpc-status, UNKNOWN), and the
// registry gathers.
func TestLabelsNotUTF8(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	l := Labels{Direction: "inbound", Authority: "web\xff:80", TLS: TLSTrue, ClientID: "c\xfe", SrvName: "s\xff",
		Dst: map[string]string{"pod": "web-\xff", "namespace": "shop"}}
	r := m.Route(l)
	if v := r.cur.Load().values; v[1] != AuthorityInvalid || v[3] != AuthorityInvalid || v[5] != AuthorityInvalid {
		t.Errorf("labels %q, want authority, client_id and srv_name %q", v, AuthorityInvalid)
	}
	if l.Dst["pod"] != "web-\xff" {
		t.Error("the caller's Dst map was changed")
	}
	r.Request()
	r.Response(200, "\xff", true, time.Millisecond)
	c := m.TCP(l)
	c.Open()
	c.Close(false)
	m.HTTPAuthz(false, Authz{SrvName: "s\xff", AuthzName: "a\xff", ClientID: "c\xff", TLS: TLSTrue})
	m.TCPAuthz(true, Authz{SrvName: "s\xff", TLS: TLSTrue})
	if _, err := reg.Gather(); err != nil {
		t.Fatal(err)
	}
	if v := promtest.ToFloat64(m.responses.WithLabelValues(append(r.cur.Load().values, "200", "2", "failure")...)); v != 1 {
		t.Errorf("a grpc-status that is not UTF-8 did not count as 2 (UNKNOWN): %v", v)
	}
}

// TestGRPCStatusBounded: grpc_status takes gRPC's codes (0 to 16); anything else a peer
// sends counts as 2 (UNKNOWN), so it cannot grow the series.
func TestGRPCStatusBounded(t *testing.T) {
	m := New(nil)
	r := m.Route(Labels{Direction: "outbound", Authority: "web:80", TLS: TLSNoIdentity})
	for i := range 20000 {
		r.Response(200, fmt.Sprintf("junk-%d", i), true, time.Millisecond)
	}
	for _, s := range []string{"17", "-1", "007", " 1", "99999999999999999999"} {
		r.Response(200, s, true, time.Millisecond)
	}
	for i := range 17 {
		r.Response(200, fmt.Sprint(i), i != 0, time.Millisecond)
	}
	// 0 to 16 each, and 2 as a failure (the junk) beside 2 the code, which also fails: 17.
	if n := promtest.CollectAndCount(m.responses, "response_total"); n != 17 {
		t.Errorf("response_total has %d series, want 17", n)
	}
	if v := promtest.ToFloat64(m.responses.WithLabelValues(append(r.cur.Load().values, "200", "2", "failure")...)); v != 20000+5+1 {
		t.Errorf("grpc_status 2: %v responses, want the junk, the unknown codes and the 2", v)
	}
}

// TestDirectionsBoundedApart: inbound clients choose authorities; once they fill the
// inbound bound, outbound routes still get series of their own.
func TestDirectionsBoundedApart(t *testing.T) {
	m := New(nil)
	m.maxRoutes = 3
	for i := range 100 {
		m.Route(Labels{Direction: "inbound", Authority: fmt.Sprintf("flood-%d:80", i), TLS: TLSNoIdentity})
		m.TCP(Labels{Direction: "inbound", Authority: fmt.Sprintf("flood-%d:80", i), TLS: TLSNoIdentity})
	}
	l := Labels{Direction: "outbound", Authority: "web:80", TLS: TLSTrue, Dst: map[string]string{"pod": "web-0"}}
	if got := m.Route(l).cur.Load().values[1]; got != "web:80" {
		t.Errorf("an outbound route after an inbound flood reads %q", got)
	}
	if got := m.TCP(l).cur.Load().values[1]; got != "web:80" {
		t.Errorf("an outbound connection after an inbound flood reads %q", got)
	}
}

// fakeClock makes m read its time from the returned clock.
func fakeClock(m *Metrics) *atomic.Int64 {
	var c atomic.Int64
	c.Store(time.Now().UnixNano())
	m.now = c.Load
	return &c
}

// TestIdleSeriesDropped: the series of a route or a kind of connection that nothing used
// for RetainIdle are dropped when /metrics is read, as linkerd2-proxy drops them (pods come
// and go: theirs would stay for the proxy's life); a kind of connection with one open stays.
// A handle kept by its caller counts again when used, into series made anew.
func TestIdleSeriesDropped(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	clock := fakeClock(m)
	pod := func(name string) Labels {
		return Labels{Direction: "outbound", Authority: "web:80", TLS: TLSTrue, Dst: map[string]string{"pod": name}}
	}
	gone, busy, closed := m.Route(pod("web-0")), m.TCP(pod("web-1")), m.TCP(pod("web-2"))
	gone.Request()
	gone.Response(200, "", false, time.Millisecond)
	busy.Open()
	closed.Open()
	closed.Close(false)
	count := func(name string) int { // a scrape
		t.Helper()
		n, err := promtest.GatherAndCount(reg, name)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	count("request_total") // the scrape that sees them used
	clock.Add(int64(RetainIdle - time.Second))
	if n := count("request_total"); n != 1 {
		t.Fatalf("request_total: %d series before RetainIdle, want 1", n)
	}
	clock.Add(int64(2 * time.Second))
	if n := count("request_total") + count("response_total") + count("response_latency_ms"); n != 0 {
		t.Errorf("%d HTTP series left after RetainIdle idle, want 0", n)
	}
	if n := count("tcp_open_total"); n != 1 {
		t.Errorf("tcp_open_total: %d series, want the open connection's alone", n)
	}
	if n := m.routes[1].n.Load() + m.conns[1].n.Load(); n != 1 {
		t.Errorf("%d handles kept, want 1", n)
	}
	gone.Request()
	if v := promtest.ToFloat64(m.requests.WithLabelValues(gone.cur.Load().values...)); v != 1 {
		t.Errorf("a dropped route used again counts %v, want 1 (its series made anew)", v)
	}
	if got := m.Route(pod("web-0")); got.cur.Load() != gone.cur.Load() {
		t.Error("a route used again does not count into the series Route gives its labels")
	}
	busy.Close(false)
	count("tcp_open_connections")
	clock.Add(int64(RetainIdle + time.Second))
	if n := count("tcp_open_connections"); n != 0 {
		t.Errorf("tcp_open_connections: %d series after the connection closed and RetainIdle passed", n)
	}
}

// TestChurnKeepsOwnSeries: pods that come and go, one after the other, do not use up the
// bound: each new one gets series of its own once the old ones are idle.
func TestChurnKeepsOwnSeries(t *testing.T) {
	m := New(nil)
	m.maxRoutes = 8
	clock := fakeClock(m)
	for i := range 200 {
		r := m.Route(Labels{Direction: "outbound", Authority: "web:80", TLS: TLSTrue, Dst: map[string]string{"pod": fmt.Sprintf("web-%d", i)}})
		if r.cur.Load().values[1] != "web:80" {
			t.Fatalf("pod %d reads authority %q: the bound was used up", i, r.cur.Load().values[1])
		}
		r.Request()
		clock.Add(int64(RetainIdle / 4))
		m.sweep() // a scrape
	}
}

// TestHandleMadeWhileDropped: a caller kept a handle whose series were dropped, and another
// asked for the same labels meanwhile: both count into one set of series, which one sweep
// drops.
func TestHandleMadeWhileDropped(t *testing.T) {
	m := New(nil)
	clock := fakeClock(m)
	l := Labels{Direction: "inbound", Authority: "web:80", TLS: TLSTrue}
	kept, keptConn := m.Route(l), m.TCP(l)
	clock.Add(int64(RetainIdle + time.Second))
	m.sweep()
	fresh, freshConn := m.Route(l), m.TCP(l)
	if fresh == kept || fresh.cur.Load() == kept.cur.Load() {
		t.Fatal("the dropped series were returned again")
	}
	kept.Request()
	fresh.Request()
	if v := promtest.ToFloat64(m.requests.WithLabelValues(kept.cur.Load().values...)); v != 2 {
		t.Errorf("request_total %v, want 2 (both handles)", v)
	}
	keptConn.Open()
	freshConn.Open()
	keptConn.Close(false)
	if v := promtest.ToFloat64(m.tcpOpenConns.WithLabelValues(kept.cur.Load().values...)); v != 1 {
		t.Errorf("tcp_open_connections %v, want 1", v)
	}
	m.sweep() // sees both used
	clock.Add(int64(RetainIdle + time.Second))
	m.sweep()
	if n := promtest.CollectAndCount(m.tcpOpenConns); n != 1 {
		t.Errorf("the kind of connection with one open was dropped (%d series)", n)
	}
	if n := promtest.CollectAndCount(m.requests); n != 0 {
		t.Errorf("request_total: %d series after both handles were idle, want 0", n)
	}
	freshConn.Close(false)
	if v := promtest.ToFloat64(m.tcpOpenConns.WithLabelValues(kept.cur.Load().values...)); v != 0 {
		t.Errorf("tcp_open_connections %v after every connection closed, want 0", v)
	}
}

// TestSweepWhileCounting: sweeps that find everything idle, beside connections opened and
// closed and requests counted through kept handles, lose no open connection: the gauge ends
// at 0 (or dropped), never below, and never a series counted into after it was dropped.
func TestSweepWhileCounting(t *testing.T) {
	m := New(nil)
	clock := fakeClock(m)
	l := Labels{Direction: "outbound", Authority: "web:80", TLS: TLSTrue}
	conn, route := m.TCP(l), m.Route(l)
	sweepingWhile(m, clock, 4, func() {
		for range 2000 {
			conn.Open()
			route.Request()
			m.Route(l).Request()
			conn.Close(false)
		}
	})
	if n := promtest.CollectAndCount(m.tcpOpenConns); n > 1 {
		t.Fatalf("%d tcp_open_connections series for one kind of connection", n)
	}
	if n := promtest.CollectAndCount(m.tcpOpenConns); n == 1 {
		if v := promtest.ToFloat64(m.tcpOpenConns.WithLabelValues(conn.cur.Load().values...)); v != 0 {
			t.Errorf("tcp_open_connections %v after every connection closed, want 0", v)
		}
	}
	route.Request()
	if n := promtest.CollectAndCount(m.requests); n != 1 {
		t.Errorf("%d request_total series for one route", n)
	}
}

// TestKeptHandlesWithinTheBound: handles that callers keep (a connection's memo of the Host
// it sent) count, once their series were dropped, into series made within the bound: past
// it, into the overflow's. Revival must not grow the series beyond MaxRoutes.
func TestKeptHandlesWithinTheBound(t *testing.T) {
	m := New(nil)
	m.maxRoutes = 3
	clock := fakeClock(m)
	var kept []*Route
	for cycle := range 4 {
		for i := range 3 {
			kept = append(kept, m.Route(Labels{Direction: "inbound", Authority: fmt.Sprintf("c%d-%d:80", cycle, i), TLS: TLSNoIdentity}))
		}
		clock.Add(int64(RetainIdle + time.Second))
		m.sweep()
	}
	for _, r := range kept {
		r.Request()
	}
	if n := m.routes[0].n.Load(); n > 4 {
		t.Errorf("%d inbound routes with series, the bound is 3 and the overflow's", n)
	}
	if n := promtest.CollectAndCount(m.requests); n > 4 {
		t.Errorf("%d request_total series, the bound is 3 and the overflow's", n)
	}
}

// TestKeptHandleAcrossManyDrops: a handle kept across many idle cycles, beside new handles
// of its labels, points at the live series directly (no chain through the handles made
// meanwhile), and counts there.
func TestKeptHandleAcrossManyDrops(t *testing.T) {
	m := New(nil)
	clock := fakeClock(m)
	l := Labels{Direction: "outbound", Authority: "web:80", TLS: TLSTrue}
	kept := m.Route(l)
	for range 1000 {
		m.sweep() // a scrape sees it used
		clock.Add(int64(RetainIdle + time.Second))
		m.sweep() // idle: dropped
		m.Route(l).Request()
		kept.Request()
	}
	if kept.cur.Load() != m.Route(l).cur.Load() {
		t.Error("the kept handle does not count into the live series of its labels")
	}
	if v := promtest.ToFloat64(m.requests.WithLabelValues(kept.cur.Load().values...)); v != 2 {
		t.Errorf("request_total %v since the last drop, want 2", v)
	}
}

// TestNoLiveSeriesLeftBehind: sweeps that find a route idle, beside goroutines using a kept
// handle, never leave a live set of series out of the table (where no sweep or Route would
// find it again, and a later drop of the table's set would delete its series under it).
func TestNoLiveSeriesLeftBehind(t *testing.T) {
	for iter := range 100 {
		m := New(nil)
		clock := fakeClock(m)
		l := Labels{Direction: "outbound", Authority: "web:80", TLS: TLSTrue}
		route := m.Route(l)
		sweepingWhile(m, clock, 2, func() {
			for range 2000 {
				route.Request()
			}
		})
		s := route.cur.Load()
		if v, ok := m.routes[1].m.Load(s.key); !s.dead.Load() && (!ok || v != s) {
			t.Fatalf("iteration %d: the kept route's series are live but not in the table", iter)
		}
	}
}

// sweepingWhile runs use on n goroutines while another sweeps m over and over, the clock
// moved on by RetainIdle before each sweep (so a set not used since the last one is dropped),
// and returns once they are all done.
func sweepingWhile(m *Metrics, clock *atomic.Int64, n int, use func()) {
	done := make(chan struct{})
	var sweeper, users sync.WaitGroup
	sweeper.Go(func() {
		for {
			select {
			case <-done:
				return
			default:
				clock.Add(int64(RetainIdle))
				m.sweep()
			}
		}
	})
	for range n {
		users.Go(use)
	}
	users.Wait()
	close(done)
	sweeper.Wait()
}
