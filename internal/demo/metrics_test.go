package demo

import (
	"math"
	"net"
	"strings"
	"testing"
)

const sampleMetrics = `# HELP request_total Total count of HTTP requests.
# TYPE request_total counter
request_total{authority="web:80",direction="outbound",server_id="web.shop",tls="true",dst_pod="web-1"} 7
request_total{authority="web:80",direction="outbound",server_id="",tls="no_identity",dst_pod="web-2"} 0
request_total{authority="cart:9090",direction="outbound",server_id="cart.shop",tls="true",dst_pod="cart-1"} 3
# TYPE response_latency_ms histogram
response_latency_ms_bucket{authority="web:80",le="1"} 2
response_latency_ms_bucket{authority="web:80",le="10"} 6
response_latency_ms_bucket{authority="web:80",le="+Inf"} 7
response_latency_ms_sum{authority="web:80"} 30
response_latency_ms_count{authority="web:80"} 7
# TYPE up gauge
up 1
`

func TestParseMetrics(t *testing.T) {
	m, err := ParseMetrics(strings.NewReader(sampleMetrics))
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Sum("request_total", Labels("authority", "web:80")); got != 7 {
		t.Errorf("Sum = %v", got)
	}
	if got := m.Sum("request_total", nil); got != 10 {
		t.Errorf("Sum of all = %v", got)
	}
	if got := m.Sum("up", nil); got != 1 {
		t.Errorf("gauge = %v", got)
	}
	if got := m.Values("request_total", "server_id", Labels("authority", "web:80")); len(got) != 1 || got[0] != "web.shop" {
		t.Errorf("Values (only series with a positive value) = %q", got)
	}
	if got := m.Values("request_total", "tls", All(Labels("direction", "outbound"), Labels("dst_pod", "cart-1"))); len(got) != 1 || got[0] != "true" {
		t.Errorf("Values with All = %q", got)
	}
	h := m.Histogram("response_latency_ms", Labels("authority", "web:80"))
	if len(h) != 3 || !math.IsInf(h[2].Le, 1) || h[2].Count != 7 {
		t.Fatalf("histogram %v", h)
	}
	if got := Quantile(0.5, h); got < 1 || got > 10 {
		t.Errorf("p50 = %v, want within the (1, 10] bucket", got)
	}
	if _, err := ParseMetrics(strings.NewReader("bad{ 1\n")); err == nil {
		t.Error("a broken exposition parsed")
	}
	var none Metrics
	if none.Sum("x", nil) != 0 || none.Histogram("x", nil) != nil {
		t.Error("a missing scrape is not empty")
	}
}

func TestQuantile(t *testing.T) {
	inf := math.Inf(1)
	cases := []struct {
		name string
		q    float64
		bs   []Bucket
		want float64
	}{
		{"none", 0.5, nil, math.NaN()},
		{"empty", 0.5, []Bucket{{1, 0}, {inf, 0}}, math.NaN()},
		{"first bucket", 0.5, []Bucket{{10, 4}, {20, 4}, {inf, 4}}, 5},
		{"interpolated", 0.75, []Bucket{{10, 2}, {20, 4}, {inf, 4}}, 15},
		{"in +Inf", 0.99, []Bucket{{10, 1}, {inf, 4}}, 10},
		{"top of a bucket", 1, []Bucket{{1, 0}, {2, 3}, {inf, 3}}, 2},
	}
	for _, c := range cases {
		got := Quantile(c.q, c.bs)
		if !(got == c.want || math.IsNaN(got) && math.IsNaN(c.want)) {
			t.Errorf("%s: Quantile(%v) = %v, want %v", c.name, c.q, got, c.want)
		}
	}
	d := Delta([]Bucket{{1, 5}, {inf, 9}}, []Bucket{{1, 2}, {inf, 3}})
	if d[0].Count != 3 || d[1].Count != 6 {
		t.Errorf("Delta = %v", d)
	}
	if d := Delta([]Bucket{{1, 5}}, nil); d[0].Count != 5 {
		t.Errorf("Delta from nothing = %v", d)
	}
}

func TestParseTarget(t *testing.T) {
	cases := []struct {
		in, auth, path string
		proto          AppKind
		err            string
	}{
		{in: "http://web.shop.svc.cluster.local", auth: "web.shop.svc.cluster.local:80", path: "/", proto: AppHTTP},
		{in: "http://web:8080/echo", auth: "web:8080", path: "/echo", proto: AppHTTP},
		{in: "grpc://cart:9090", auth: "cart:9090", proto: AppGRPC},
		{in: "tcp://pg:5432", auth: "pg:5432", proto: AppTCP},
		{in: "grpc://cart", err: "needs a port"},
		{in: "tCp://]:1", err: "bad host"}, // url.Parse takes "]" as the host (found by FuzzParseTarget)
		{in: "udp://x:1", err: "want http, grpc or tcp"},
		{in: "http://x:99999", err: "bad port"},
		{in: "web:80", err: "want http://"},
		{in: "", err: "want http://"},
	}
	for _, c := range cases {
		got, err := ParseTarget(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("ParseTarget(%q) = %+v, %v; want an error with %q", c.in, got, err, c.err)
			}
			continue
		}
		if err != nil || got.Authority != c.auth || got.Path != c.path || got.Protocol != c.proto {
			t.Errorf("ParseTarget(%q) = %+v, %v", c.in, got, err)
		}
	}
}

// FuzzParseTarget: any input parses or is refused with an error naming it; what parses has
// a host:port authority and a known protocol.
func FuzzParseTarget(f *testing.F) {
	for _, s := range []string{"http://web.shop.svc.cluster.local", "grpc://cart:9090", "tcp://pg:5432", "http://[::1]:80/x", "http://x:0", "tcp://:1", "%zz", strings.Repeat("a", 300)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tg, err := ParseTarget(s)
		if err != nil {
			return
		}
		if _, _, err := net.SplitHostPort(tg.Authority); err != nil {
			t.Errorf("ParseTarget(%q).Authority %q: %v", s, tg.Authority, err)
		}
		if tg.Protocol != AppHTTP && tg.Protocol != AppGRPC && tg.Protocol != AppTCP {
			t.Errorf("ParseTarget(%q).Protocol %q", s, tg.Protocol)
		}
	})
}
