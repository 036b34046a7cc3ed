package demo

import (
	"fmt"
	"math"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/meridian-mesh/meridian/ring"
)

func metricsOf(t *testing.T, text string) Metrics {
	t.Helper()
	m, err := ParseMetrics(strings.NewReader(text))
	if err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	return m
}

const (
	lgID  = "loadgen.shop.serviceaccount.identity.linkerd.cluster.local"
	webID = "web.shop.serviceaccount.identity.linkerd.cluster.local"
)

// clientProxy is the loadgen proxy's outbound metrics after n web requests (ok of them
// successful, denied with 403) and n postgres connections (failed of them failing).
func clientProxy(n, ok, denied, failed int) string {
	out := `authority="web.shop.svc.cluster.local:80",direction="outbound",tls="true",server_id="` + webID + `",dst_pod="web-1"`
	pg := `authority="postgres.billing.svc.cluster.local:5432",direction="outbound",tls="true",server_id="pg.billing",dst_pod="postgres-0"`
	return fmt.Sprintf(`# TYPE request_total counter
request_total{%[1]s} %[3]d
# TYPE response_total counter
response_total{%[1]s,classification="success",status_code="200",grpc_status=""} %[4]d
response_total{%[1]s,classification="success",status_code="403",grpc_status=""} %[5]d
response_total{%[1]s,classification="failure",status_code="502",grpc_status=""} %[6]d
# TYPE response_latency_ms histogram
response_latency_ms_bucket{%[1]s,le="1"} %[3]d
response_latency_ms_bucket{%[1]s,le="+Inf"} %[3]d
response_latency_ms_sum{%[1]s} 1
response_latency_ms_count{%[1]s} %[3]d
# TYPE tcp_open_total counter
tcp_open_total{%[2]s} %[3]d
# TYPE tcp_close_total counter
tcp_close_total{%[2]s,classification="success"} %[7]d
tcp_close_total{%[2]s,classification="failure"} %[6]d
`, out, pg, n, ok, denied, failed, n-failed)
}

func generator(n int) string {
	return fmt.Sprintf(`# TYPE demo_traffic_requests_total counter
demo_traffic_requests_total{target="http://web.shop.svc.cluster.local",protocol="http",result="ok"} %[1]d
demo_traffic_requests_total{target="http://web.shop.svc.cluster.local",protocol="http",result="denied"} 2
demo_traffic_requests_total{target="http://web.shop.svc.cluster.local",protocol="http",result="failed"} 0
demo_traffic_requests_total{target="tcp://postgres.billing.svc.cluster.local:5432",protocol="tcp",result="ok"} %[1]d
# TYPE demo_traffic_latency_ms histogram
demo_traffic_latency_ms_bucket{target="tcp://postgres.billing.svc.cluster.local:5432",le="4"} %[1]d
demo_traffic_latency_ms_bucket{target="tcp://postgres.billing.svc.cluster.local:5432",le="+Inf"} %[1]d
demo_traffic_latency_ms_sum{target="tcp://postgres.billing.svc.cluster.local:5432"} 1
demo_traffic_latency_ms_count{target="tcp://postgres.billing.svc.cluster.local:5432"} %[1]d
`, n)
}

const webProxy = `# TYPE request_total counter
request_total{direction="inbound",client_id="` + lgID + `",tls="true"} 9
# TYPE inbound_http_authz_allow_total counter
inbound_http_authz_allow_total{srv_name="all-unauthenticated",authz_name="all-unauthenticated",client_id="x",tls="true"} 9
# TYPE inbound_http_authz_deny_total counter
inbound_http_authz_deny_total{srv_name="web-http",authz_name="",client_id="x",tls="true"} 2
`

const webApp = `# TYPE demo_app_requests_total counter
demo_app_requests_total{protocol="http",client_id="` + lgID + `"} 9
`

func ringOf(names ...string) *RingView {
	ms := make([]ring.Member, len(names))
	for i, n := range names {
		ms[i] = ring.Member{Name: n, Addr: n + ":8086"}
	}
	r := ring.Build(ms, ring.DefaultHashConfig())
	v := &RingView{Self: names[0], ID: fmt.Sprintf("%016x", r.ID())}
	for _, m := range r.Status().Members {
		v.Members = append(v.Members, RingMember{Name: m.Name, Addr: m.Addr, Partitions: m.Partitions, Share: m.Share})
	}
	return v
}

func testInputs(t *testing.T) Inputs {
	t0 := time.Unix(1000, 0)
	prev := &Scrape{At: t0, Rings: map[string]*RingView{"dst-0": ringOf("dst-0", "dst-1"), "dst-1": ringOf("dst-0", "dst-1")},
		Metrics: map[string]Metrics{"proxy/loadgen": metricsOf(t, clientProxy(10, 10, 0, 0)), "traffic/loadgen": metricsOf(t, generator(10))}}
	cur := &Scrape{At: t0.Add(10 * time.Second), Rings: prev.Rings, Metrics: map[string]Metrics{
		"proxy/loadgen": metricsOf(t, clientProxy(60, 48, 2, 10)), "traffic/loadgen": metricsOf(t, generator(60)),
		"proxy/web-1": metricsOf(t, webProxy), "app/web-1": metricsOf(t, webApp)}}
	return Inputs{
		Now: cur.At, Started: t0.Add(-time.Minute), Replicas: []string{"dst-0", "dst-1"}, ReplicaAddrs: []string{"a:1", "b:1"},
		Procs: []ProcState{{Name: "dst-0", Alive: true, Pid: 10}, {Name: "dst-1", Alive: true, Pid: 11}, {Name: "proxy/loadgen", Alive: true}},
		Pods: []PodPlan{{Name: "loadgen", App: "loadgen", Identity: lgID, Meshed: true, Traffic: []string{"demo", "traffic"}, IP: netip.MustParseAddr("127.0.0.9")},
			{Name: "web-1", Meshed: true}},
		Services: []ServiceState{
			{Namespace: "shop", Name: "web", Ports: []PortState{{Port: 80, Resolved: true, Exists: true, Endpoints: []EndpointState{{Addr: "127.0.10.1:8080", Identity: webID}}}}},
			{Namespace: "shop", Name: "search", Ports: []PortState{{Port: 80, Resolved: true, Exists: true}}},
			{Namespace: "legacy", Name: "mainframe", Note: "ExternalName"},
		},
		History: []*Scrape{prev, cur}, Window: 10 * time.Second,
	}
}

func TestBuildModel(t *testing.T) {
	in := testInputs(t)
	m := BuildModel(in)
	if m.Uptime != 70*time.Second || m.Processes != 3 || m.Live != 3 || m.Window != 10*time.Second {
		t.Errorf("header: %+v", m)
	}
	if !m.Ring.Agreed || m.Ring.Members != 2 || m.Ring.SeenBy != "dst-0" || len(m.Ring.Rows) != 2 || !m.Ring.Rows[1].InRing || m.Ring.Rows[1].Pid != 11 {
		t.Errorf("ring: %+v", m.Ring)
	}
	r := ring.Build([]ring.Member{{Name: "dst-0", Addr: "dst-0:8086"}, {Name: "dst-1", Addr: "dst-1:8086"}}, ring.DefaultHashConfig())
	for _, s := range m.Services {
		if want := r.Owner(s.Service).Name; s.Owner != want {
			t.Errorf("%s: owner %s, want %s (the ring's)", s.Service, s.Owner, want)
		}
	}
	notes := map[string]string{}
	for _, s := range m.Services {
		notes[s.Service] = s.Note
	}
	if !strings.Contains(notes["shop/search"], "no ready endpoints") || notes["legacy/mainframe"] != "ExternalName" || notes["shop/web"] != "" {
		t.Errorf("notes %q", notes)
	}
	if len(m.Routes) != 2 {
		t.Fatalf("routes %+v", m.Routes)
	}
	web, pg := m.Routes[0], m.Routes[1]
	// 50 requests in 10 s, 38 of them successful (200 and 403), 2 denied.
	if web.Proto != AppHTTP || web.RPS != 5 || math.Abs(web.Success-0.8) > 1e-9 || web.DeniedRPS != 0.2 || math.Abs(web.P99-0.99) > 1e-9 {
		t.Errorf("web route: %+v", web)
	}
	if !web.TLS || strings.Join(web.Servers, ",") != webID || strings.Join(web.Clients, ",") != lgID || strings.Join(web.AppSaw, ",") != lgID {
		t.Errorf("web identities: %+v", web)
	}
	if web.OK != 60 || web.Denied != 2 || web.Failed != 0 || m.Traffic.OK != 120 || m.Traffic.Denied != 2 {
		t.Errorf("client counts: web %+v, totals %+v", web, m.Traffic)
	}
	// 50 connections, 10 of 50 closes failed; latency from the generator.
	if pg.Proto != AppTCP || pg.RPS != 5 || math.Abs(pg.Success-0.8) > 1e-9 || pg.P50 <= 0 || pg.P50 > 4 {
		t.Errorf("postgres route: %+v", pg)
	}
	if len(m.Policy) != 2 || m.Policy[0].Allowed != 9 || m.Policy[1].Denied != 2 || m.Policy[1].Server != "web-http" {
		t.Errorf("policy %+v", m.Policy)
	}
}

func TestBuildModelRingViews(t *testing.T) {
	in := testInputs(t)
	cur := in.History[len(in.History)-1]
	cur.Rings = map[string]*RingView{"dst-0": ringOf("dst-0", "dst-1"), "dst-1": ringOf("dst-1")}
	m := BuildModel(in)
	if m.Ring.Agreed {
		t.Error("two rings reported as agreed")
	}
	// dst-0 is dead: the ring is dst-1's view, and dst-0's row says it is down but kept its address.
	in.Procs[0].Alive = false
	m = BuildModel(in)
	if m.Ring.SeenBy != "dst-1" || m.Ring.Rows[0].Alive || m.Ring.Rows[0].InRing || m.Ring.Rows[0].Addr != "a:1" {
		t.Errorf("ring with dst-0 down: %+v", m.Ring)
	}
	for _, s := range m.Services {
		if s.Owner != "dst-1" {
			t.Errorf("%s owned by %s in a ring of dst-1 alone", s.Service, s.Owner)
		}
	}
	// A ring whose partitions do not match the default shape: owners unknown.
	cur.Rings["dst-1"].Members[0].Partitions = 7
	if m = BuildModel(in); m.Services[0].Owner != "?" {
		t.Errorf("owner %q from a ring of another shape", m.Services[0].Owner)
	}
	// No scrape yet: an empty model, no panic.
	in.History = nil
	if m = BuildModel(in); len(m.Routes) != 0 || m.Ring.SeenBy != "" {
		t.Errorf("model without scrapes: %+v", m)
	}
}

func TestRender(t *testing.T) {
	m := BuildModel(testInputs(t))
	m.Events = []Event{{At: 5 * time.Second, Text: "killed dst-1"}}
	var plainOut, colorOut strings.Builder
	Render(&plainOut, m, ViewOptions{Title: "T", Hints: []string{"try this"}, Keys: "k kill"})
	Render(&colorOut, m, ViewOptions{Title: "T", Color: true})
	s := plainOut.String()
	for _, want := range []string{"T   up 1:10   3/3 processes running", "RING  2 members", "REPLICA  ADDRESS", "dst-0", "shop/web", "127.0.10.1:8080 meshed",
		"no ready endpoints", "web.shop:80", "loadgen.shop -> web.shop (app saw it)", "80.0%", "0.2/s",
		"since the start: 120 ok, 2 denied, 0 failed", "web-http", "0:05  killed dst-1", "KEYS  k kill", "TRY", "try this"} {
		if !strings.Contains(s, want) {
			t.Errorf("view lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "\x1b") || !strings.Contains(colorOut.String(), ansiGreen) {
		t.Error("colour where there should be none, or none where there should be")
	}
	// Columns line up: every row of the ring table starts its ADDRESS column at one offset.
	lines := strings.Split(s, "\n")
	col := -1
	for _, l := range lines {
		if strings.HasPrefix(l, "  REPLICA") || strings.HasPrefix(l, "  dst-") {
			i := strings.Index(l, "a:1")
			if strings.HasPrefix(l, "  REPLICA") {
				i = strings.Index(l, "ADDRESS")
			}
			if i < 0 {
				continue
			}
			if col >= 0 && i != col {
				t.Errorf("misaligned ring table:\n%s", s)
			}
			col = i
		}
	}
}

func TestFitWidth(t *testing.T) {
	s := ansiGreen + "héllo" + ansiReset + " world"
	if got := fitWidth(s, 3); got != ansiGreen+"hél"+ansiReset {
		t.Errorf("fitWidth = %q", got)
	}
	if got := fitWidth(s, 0); got != s {
		t.Errorf("no limit: %q", got)
	}
	if got := fitWidth("abc", 10); got != "abc" {
		t.Errorf("short line: %q", got)
	}
	if got := fitWidth("\x1b[", 5); got != "\x1b[" {
		t.Errorf("cut sequence: %q", got)
	}
}

// TestRouteIdentitiesArePerClient: the server side of a route counts only the route's own
// client; another client calling the same pods is not taken for it.
func TestRouteIdentitiesArePerClient(t *testing.T) {
	in := testInputs(t)
	cur := in.History[len(in.History)-1]
	other := strings.ReplaceAll(webProxy, lgID, "reports.billing.serviceaccount.identity.linkerd.cluster.local")
	cur.Metrics["proxy/web-1"] = metricsOf(t, other)
	cur.Metrics["app/web-1"] = metricsOf(t, strings.ReplaceAll(webApp, lgID, "reports.billing.serviceaccount.identity.linkerd.cluster.local"))
	m := BuildModel(in)
	if web := m.Routes[0]; len(web.Clients) != 0 || len(web.AppSaw) != 0 {
		t.Errorf("loadgen's route credited with another client's identity: %+v", web)
	}
	var b strings.Builder
	Render(&b, m, ViewOptions{})
	if !strings.Contains(b.String(), "? -> web.shop") {
		t.Errorf("an unverified client is not shown as such:\n%s", b.String())
	}
}

func TestReplicaToKill(t *testing.T) {
	m := &mesh{}
	md := Model{
		Ring: RingModel{Rows: []RingRow{{Name: "dst-0", Alive: true}, {Name: "dst-1", Alive: true}, {Name: "dst-2", Alive: false}}},
		Services: []ServiceRow{
			{Service: "shop/web", Owner: "dst-1"}, {Service: "shop/cart", Owner: "dst-1"}, {Service: "shop/cart", Owner: "dst-1"},
			{Service: "billing/postgres", Owner: "dst-0"}, {Service: "legacy/idle", Owner: "dst-0"}, {Service: "legacy/idle2", Owner: "dst-0"},
		},
		Routes: []RouteRow{{Authority: "web.shop.svc.cluster.local:80"}, {Authority: "cart.shop.svc.cluster.local:9090"}, {Authority: "postgres.billing.svc.cluster.local:5432"}},
	}
	// dst-1 owns two of the services the traffic goes to (dst-0 owns more services, but one of them only is called).
	if got := m.replicaToKill(md); got != "dst-1" {
		t.Errorf("replicaToKill = %q, want dst-1", got)
	}
	md.Ring.Rows[1].Alive = false
	if got := m.replicaToKill(md); got != "" {
		t.Errorf("replicaToKill with one live replica = %q, want none", got)
	}
}
