package dataplane

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meridian-mesh/meridian/internal/manifest"
	"github.com/meridian-mesh/meridian/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.Main(m, nil)) }

func TestConfigValidate(t *testing.T) {
	ok := DefaultConfig()
	ok.Binary = "meridian"
	if err := ok.Validate(); err != nil {
		t.Fatalf("the default config with a binary: %v", err)
	}
	for name, mutate := range map[string]func(*Config){
		"no binary":        func(c *Config) { c.Binary = "" },
		"zero rate":        func(c *Config) { c.Rate = 0 },
		"no rounds":        func(c *Config) { c.Rounds = 0 },
		"no protocols":     func(c *Config) { c.Protocols = nil },
		"bad variant":      func(c *Config) { c.Variants = []Variant{"haproxy"} },
		"bad protocol":     func(c *Config) { c.Protocols = []Protocol{"http3"} },
		"no connections":   func(c *Config) { c.Connections = 0 },
		"negative workers": func(c *Config) { c.NginxWorkers = -1 },
	} {
		c := ok
		mutate(&c)
		if c.Validate() == nil {
			t.Errorf("%s: validated", name)
		}
	}
	if _, err := ParseVariants([]string{"direct", "envoy"}); err == nil || !strings.Contains(err.Error(), "envoy") {
		t.Errorf("ParseVariants: %v", err)
	}
	if p, err := ParseProtocols([]string{"grpc", "http1"}); err != nil || len(p) != 2 {
		t.Errorf("ParseProtocols: %v %v", p, err)
	}
}

// TestClusterYAML: the destination's directory source reads one Service with two ports, its
// EndpointSlice at the application's address and the meshed pod.
func TestClusterYAML(t *testing.T) {
	topo := topology{x: 150, y: 7}
	d := manifest.NewDecoder()
	d.PassUnknown = true
	res := d.Decode("bench.yaml", topo.clusterYAML())
	if len(res.Errors) > 0 {
		t.Fatal(res.Errors)
	}
	kinds := map[string]int{}
	for _, o := range res.Objects {
		kinds[o.Key.Kind]++
	}
	if kinds["Service"] != 1 || kinds["EndpointSlice"] != 1 || kinds["Pod"] != 1 {
		t.Errorf("objects: %v", kinds)
	}
	y := string(topo.clusterYAML())
	if !strings.Contains(y, `addresses: ["127.150.7.2"]`) || !strings.Contains(y, "linkerd.io/control-plane-ns: linkerd") {
		t.Errorf("the YAML does not put the meshed pod at the app's address:\n%s", y)
	}
}

// TestNginxConf: both configurations name the right listeners and upstreams, and nginx
// (when installed) accepts them.
func TestNginxConf(t *testing.T) {
	topo := topology{x: 150, y: 7}
	for _, front := range []bool{true, false} {
		dir := t.TempDir()
		conf := string(topo.nginxConf(front, 1, dir))
		listen, up := "127.150.7.4", "127.150.7.2"
		if front {
			listen, up = "127.150.7.3", "127.150.7.4"
		}
		for _, want := range []string{"listen " + listen + ":8080;", "listen " + listen + ":8081 http2;", "server " + up + ":8080; keepalive 64",
			"server " + up + ":8081; keepalive 64", "grpc_pass grpc://h2;", "proxy_pass http://h1;", "proxy_http_version 1.1;", "worker_processes 1;"} {
			if !strings.Contains(conf, want) {
				t.Errorf("front %v: no %q in\n%s", front, want, conf)
			}
		}
		nginx, err := exec.LookPath("nginx")
		if err != nil {
			continue
		}
		path := filepath.Join(dir, "nginx.conf")
		if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(nginx, "-t", "-e", "stderr", "-p", dir, "-c", path).CombinedOutput(); err != nil {
			t.Errorf("nginx -t refuses the configuration (front %v): %v\n%s", front, err, out)
		}
	}
}

func TestReadResponse(t *testing.T) {
	for _, tc := range []struct {
		raw       string
		keep, bad bool
	}{
		{"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n", true, false},
		{"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nok\n\r\n0\r\n\r\n", true, false},
		{"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n", false, false},
		{"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n", false, true},
		{"HTTP/1.1 200 OK\r\n\r\n", false, true},
	} {
		keep, err := readResponse(bufio.NewReader(strings.NewReader(tc.raw + "next")))
		if (err != nil) != tc.bad || err == nil && keep != tc.keep {
			t.Errorf("%q: keep %v, err %v", tc.raw, keep, err)
		}
	}
}

// TestApp: the application answers GETs on keep-alive connections, records l5d-client-id,
// honours Connection: close and refuses what it does not take.
func TestApp(t *testing.T) {
	a, err := startApp("127.0.0.1:0", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer a.close()
	c, err := net.Dial("tcp", a.httpLis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	for _, req := range []string{
		"GET / HTTP/1.1\r\nHost: a\r\nL5d-Client-Id: " + clientID + "\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\n\r\nbody",
		"GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
	} {
		if _, err := c.Write([]byte(req)); err != nil {
			t.Fatal(err)
		}
		if _, err := readResponse(br); err != nil {
			t.Fatalf("%q: %v", req, err)
		}
	}
	if _, err := br.ReadByte(); err == nil {
		t.Error("the connection stayed open after Connection: close")
	}
	if a.lastClientID() != clientID || a.requests.Load() != 3 {
		t.Errorf("client id %q, %d requests", a.lastClientID(), a.requests.Load())
	}
	c2, err := net.Dial("tcp", a.httpLis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	_ = c2.SetDeadline(time.Now().Add(10 * time.Second))
	_, _ = c2.Write([]byte("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"))
	if line, _ := bufio.NewReader(c2).ReadString('\n'); !strings.HasPrefix(line, "HTTP/1.1 400") {
		t.Errorf("a chunked request: %q", line)
	}
}

// TestGeneratorRateAndNoCoordinatedOmission: a segment sends its requests at the rate asked
// for; and when the application stalls, the requests that fall due meanwhile are charged
// the wait (their latency runs from when they were due, not from when they were sent).
func TestGeneratorRateAndNoCoordinatedOmission(t *testing.T) {
	a, err := startApp("127.0.0.1:0", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer a.close()
	addr := a.httpLis.Addr().String()
	senders := []sender{newH1Sender(addr, "app", false), newH1Sender(addr, "app", false)}
	defer func() {
		for _, s := range senders {
			s.close()
		}
	}()
	seg := runSegment(context.Background(), senders, 1000, 500*time.Millisecond)
	if seg.sent != 500 || seg.errors != 0 || seg.latency.TotalCount() != 500 {
		t.Fatalf("sent %d, errors %d (%v), recorded %d; want 500 sent and recorded", seg.sent, seg.errors, seg.err, seg.latency.TotalCount())
	}
	if seg.elapsed < 400*time.Millisecond {
		t.Errorf("500 requests at 1000/s took %v", seg.elapsed)
	}

	// One worker, and a stall of 200 ms: the ~200 requests due during it wait, and count it.
	stall := &stallSender{sender: newH1Sender(addr, "app", false), at: 100, stall: 200 * time.Millisecond}
	defer stall.close()
	seg = runSegment(context.Background(), []sender{stall}, 1000, 500*time.Millisecond)
	slow := seg.latency.TotalCount() - seg.latency.CumulativeDistribution()[0].Count
	var over50 int64
	for _, b := range seg.latency.Distribution() {
		if b.From >= 50_000 {
			over50 += b.Count
		}
	}
	if seg.sent != 500 || over50 < 50 {
		t.Errorf("after a 200 ms stall: %d requests over 50 ms of %d (%d slow), want at least 50: the wait was not charged", over50, seg.sent, slow)
	}
	if seg.service.Max() > seg.latency.Max() {
		t.Errorf("service time %d us over latency %d us", seg.service.Max(), seg.latency.Max())
	}
}

// stallSender stalls once, on its at-th request.
type stallSender struct {
	sender
	n, at int
	stall time.Duration
}

func (s *stallSender) send(ctx context.Context) error {
	s.n++
	if s.n == s.at {
		time.Sleep(s.stall)
	}
	return s.sender.send(ctx)
}

// TestResult: added latency is the median over rounds of each round's difference to direct,
// the ratios and targets follow, and the table and JSON carry them.
func TestResult(t *testing.T) {
	rounds := func(p50s ...float64) []RoundResult {
		var out []RoundResult
		for _, v := range p50s {
			out = append(out, RoundResult{P50Ms: v, P99Ms: 10 * v})
		}
		return out
	}
	allocs := 3.0
	p := ProtocolResult{Protocol: HTTP1, Variants: []VariantResult{
		{Variant: Direct, Rounds: rounds(0.5, 0.6, 5)},
		{Variant: Nginx, Rounds: rounds(0.6, 0.8, 0.7)},
		{Variant: Meridian, Rounds: rounds(0.55, 0.7, 9), Processes: []ProcessResult{
			{Name: "proxy-client", RSSMaxBytes: 20 << 20, AllocsPerRequest: &allocs, AllocsPerRequestRaw: &allocs},
			{Name: "proxy-server", RSSMaxBytes: 40 << 20},
		}},
	}}
	p.compare()
	// nginx: 0.1, 0.2, -4.3 -> 0.1; meridian: 0.05, 0.1, 4 -> 0.1
	if d := p.NginxAddedP50Ms - 0.1; d > 1e-9 || d < -1e-9 {
		t.Errorf("nginx added p50 %v, want 0.1", p.NginxAddedP50Ms)
	}
	if p.AddedP50Ratio == nil || *p.AddedP50Ratio < 0.999 || *p.AddedP50Ratio > 1.001 {
		t.Errorf("p50 ratio %v, want 1", p.AddedP50Ratio)
	}
	r := &Result{Protocols: []ProtocolResult{p}}
	r.checkTargets()
	missed := strings.Join(r.missed(), ";")
	if !strings.Contains(missed, "proxy-server RSS") || strings.Contains(missed, "proxy-client RSS") || strings.Contains(missed, "added p50") {
		t.Errorf("missed: %s", missed)
	}
	var tbl bytes.Buffer
	if err := WriteTable(&tbl, r); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(tbl.String(), "MISSED") || !strings.Contains(tbl.String(), "meridian's added latency / nginx's") {
		t.Errorf("table:\n%s", tbl.String())
	}
	path := filepath.Join(t.TempDir(), "r.json")
	if err := WriteJSON(path, r); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil || doc["targets"] == nil || doc["protocols"] == nil {
		t.Errorf("JSON: %v %s", err, b)
	}
}

// TestAddedTargetWithoutRatio: where nginx's pair adds no latency, or less than none (the
// gRPC relays can beat the direct path at the median), there is no ratio, and the target
// compares the added latencies in milliseconds instead of being left out.
func TestAddedTargetWithoutRatio(t *testing.T) {
	rounds := func(p50 float64) []RoundResult { return []RoundResult{{P50Ms: p50, P99Ms: 10 * p50}} }
	for _, c := range []struct {
		meridian float64
		met      bool
	}{{0.9, true}, {0.95, true}, {1.01, false}} {
		p := ProtocolResult{Protocol: GRPC, Variants: []VariantResult{
			{Variant: Direct, Rounds: rounds(1)},
			{Variant: Nginx, Rounds: rounds(0.95)}, // nginx adds -0.05 ms at p50, -0.5 at p99
			{Variant: Meridian, Rounds: rounds(c.meridian)},
		}}
		p.compare()
		r := &Result{Protocols: []ProtocolResult{p}}
		r.checkTargets()
		var p50 *Target
		for i := range r.Targets {
			if strings.HasPrefix(r.Targets[i].Name, "grpc added p50") {
				p50 = &r.Targets[i]
			}
		}
		if p50 == nil {
			t.Fatalf("meridian %v: no p50 target among %+v", c.meridian, r.Targets)
		}
		if p50.Met != c.met || p50.Unit != "ms" {
			t.Errorf("meridian %v: %+v, want met %v in ms", c.meridian, *p50, c.met)
		}
	}
}
