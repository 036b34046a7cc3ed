package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	pb "github.com/linkerd/linkerd2-proxy-api/go/destination"
	pbnet "github.com/linkerd/linkerd2-proxy-api/go/net"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/meridian-mesh/meridian/bench/gen"
	"github.com/meridian-mesh/meridian/internal/testutil"
	"github.com/meridian-mesh/meridian/internal/wire"
)

func TestParseMetrics(t *testing.T) {
	in := `# HELP go_memstats_heap_alloc_bytes x
# TYPE go_memstats_heap_alloc_bytes gauge
go_memstats_heap_alloc_bytes 1.5e+06
endpoint_updates_queue_overflow 3
destination_streams{method="get"} 10
destination_streams{method="get_profile",x="a b}"} 5
process_cpu_seconds_total 1.25 1700000000
`
	m, err := parseMetrics(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]float64{
		"go_memstats_heap_alloc_bytes": 1.5e6, "endpoint_updates_queue_overflow": 3, "destination_streams": 15, "process_cpu_seconds_total": 1.25,
		`destination_streams{method="get"}`: 10, `destination_streams{method="get_profile",x="a b}"}`: 5,
	} {
		if m[k] != want {
			t.Errorf("%s = %g, want %g", k, m[k], want)
		}
	}
	for _, bad := range []string{"x{a=\"b\" 1", "x", "x abc"} {
		if _, err := parseMetrics(strings.NewReader(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func FuzzParseMetrics(f *testing.F) {
	f.Add("a 1\nb{c=\"d\"} 2\n# c\n")
	f.Add("x{")
	f.Fuzz(func(t *testing.T, s string) {
		_, _ = parseMetrics(strings.NewReader(s))
	})
}

func TestReplicaArgs(t *testing.T) {
	s := ReplicaSpec{Index: 2, FeedAddr: "127.0.0.1:1", Addr: "127.0.0.1:2", AdminAddr: "127.0.0.1:3", GossipAddr: "127.0.0.1:4", Seed: "127.0.0.1:5", GossipKeyFile: "/k/gossip.key"}
	a := ReplicaArgs(s)
	if a[0] != "destination" || !slices.Contains(a, "feed:127.0.0.1:1") || slices.Contains(a, "--gossip-addr") || !slices.Contains(a, "--enable-pprof") || !slices.Contains(a, "--plaintext") {
		t.Errorf("without ring: %v", a)
	}
	k := s
	k.Kubeconfig = "/d/kubeconfig"
	if a := ReplicaArgs(k); !slices.Contains(a, "kubernetes") || !slices.Contains(a, "/d/kubeconfig") || slices.Contains(a, "feed:127.0.0.1:1") || !slices.Contains(a, "--plaintext") {
		t.Errorf("kubernetes source: %v", a)
	}
	s.Ring = true
	a = ReplicaArgs(s)
	for _, want := range []string{"--node-name", "shard2", "--gossip-addr", "127.0.0.1:4", "--join", "127.0.0.1:5", "--gossip-key-file", "/k/gossip.key", "--non-owner", "forward"} {
		if !slices.Contains(a, want) {
			t.Errorf("with ring: %v lacks %s", a, want)
		}
	}
}

func TestValidate(t *testing.T) {
	c := DefaultConfig()
	c.Binary = "x"
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, mut := range []func(*Config){
		func(c *Config) { c.Shards = nil },
		func(c *Config) { c.Shards = []int{0} },
		func(c *Config) { c.StreamsPerConn = 0 },
		func(c *Config) { c.Churn = -1 },
		func(c *Config) { c.Churn = math.NaN() },
		func(c *Config) { c.Churn = math.Inf(1) },
		func(c *Config) { c.ScaleShare = math.NaN() },
		func(c *Config) { c.Cluster.MeshedShare = math.NaN() },
		func(c *Config) { c.KillAt = c.Duration + 1 },
		func(c *Config) { c.Binary = "" },
		func(c *Config) { c.Cluster.Services = 0 },
		func(c *Config) { c.ReplicaCPUs = -2 },
		func(c *Config) { c.MaxKillConverge = -time.Second },
		func(c *Config) { c.MaxKillConverge = 5 * time.Second }, // without a kill
		func(c *Config) { c.Source = "etcd" },
		func(c *Config) { c.KubePods = true },                                // with the feed
		func(c *Config) { c.KubePolicy = true },                              // with the feed
		func(c *Config) { c.Source, c.DeliverPods = SourceKubernetes, true }, // a feed option
		func(c *Config) { c.ScaleShare = 1.5 },
		func(c *Config) { c.CreateConcurrency = 0 },
	} {
		c := DefaultConfig()
		c.Binary = "x"
		mut(&c)
		if c.Validate() == nil {
			t.Errorf("%+v: no error", c)
		}
	}
}

// TestLagging: a stream differs from the truth by an address that changed recently (in
// flight: not lagging), or by one that did not (left behind: lagging).
func TestLagging(t *testing.T) {
	l := newLoad(gen.Config{Services: 1, Namespaces: 1}, 1)
	addr := func(serial uint32) netip.AddrPort {
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, byte(serial >> 16), byte(serial >> 8), byte(serial)}), 8080)
	}
	now := time.Now()
	truth := map[int]map[netip.AddrPort]struct{}{0: {addr(1): {}, addr(2): {}}}
	st := &stream{svc: 0, view: addrView{}}
	l.streams = []*stream{st, {svc: 0, profile: true}} // profile streams are not compared
	set := func(serials ...uint32) {
		clear(st.view)
		for _, s := range serials {
			st.view[wire.KeyOf(addr(s))] = struct{}{}
		}
	}
	l.recordChanged(gen.Change{Old: 2, New: 2}, now.Add(-100*time.Millisecond))
	l.recordChanged(gen.Change{Old: 3, New: 3}, now.Add(-100*time.Millisecond))
	l.recordChanged(gen.Change{Old: 4, New: 4}, now.Add(-time.Hour))
	for _, tc := range []struct {
		view []uint32
		want int
	}{
		{[]uint32{1, 2}, 0},    // the truth
		{[]uint32{1}, 0},       // 2 was just added: on its way
		{[]uint32{1, 2, 3}, 0}, // 3 was just removed: on its way
		{[]uint32{2}, 1},       // 1 never changed: missing
		{[]uint32{1, 2, 4}, 1}, // 4 was removed an hour ago
		{nil, 1},               // a stream reopened and still empty
	} {
		set(tc.view...)
		if got := l.lagging(truth, now, convergeTolerance); got != tc.want {
			t.Errorf("view %v: lagging %d, want %d", tc.view, got, tc.want)
		}
	}
}

func TestReplicaProcs(t *testing.T) {
	c := DefaultConfig()
	for _, tc := range []struct{ cpus, n, set, want int }{
		{2, 1, 0, 2}, {2, 4, 0, 1}, {8, 4, 0, 2}, {8, 3, 0, 2}, {1, 1, 0, 1},
		{2, 4, 3, 3}, {2, 4, -1, 0},
	} {
		c.ReplicaCPUs = tc.set
		if got := c.replicaProcs(tc.n, tc.cpus); got != tc.want {
			t.Errorf("%d CPUs, %d replicas, --replica-cpus %d: GOMAXPROCS %d, want %d", tc.cpus, tc.n, tc.set, got, tc.want)
		}
	}
}

func sampleResult() *Result {
	r1 := RunResult{Shards: 1, P50Ms: 1, P99Ms: 5, P999Ms: 9, MaxMs: 12, LatencySamples: 100,
		LatencyCDF:        []CDFPoint{{0.5, 0.1}, {1, 0.5}, {5, 0.99}, {12, 1}},
		HeapBytesPerShard: []uint64{400 << 20}, RSSBytesPerShard: []uint64{600 << 20}}
	r4 := RunResult{Shards: 4, P50Ms: 0.8, P99Ms: 3, P999Ms: 6, MaxMs: 8, LatencySamples: 100,
		LatencyCDF:        []CDFPoint{{0.4, 0.1}, {0.8, 0.5}, {3, 0.99}, {8, 1}},
		HeapBytesPerShard: []uint64{100 << 20, 110 << 20, 95 << 20, 105 << 20}, RSSBytesPerShard: []uint64{200 << 20, 210 << 20, 190 << 20, 205 << 20}}
	return &Result{Streams: 10, StreamsPerConn: 5, ChurnPerSecond: 10, DurationS: 1, Runs: []RunResult{r1, r4}}
}

func TestTableAndHTML(t *testing.T) {
	res := sampleResult()
	var b bytes.Buffer
	if err := WriteTable(&b, res); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if !strings.Contains(out, "4/1") || !regexp.MustCompile(`heap per shard, mean.*0\.26`).MatchString(out) {
		t.Errorf("table:\n%s", out)
	}
	if strings.Contains(out, "API server") || strings.Contains(out, "etcd") {
		t.Errorf("the feed source's table has the API server's rows:\n%s", out)
	}
	kres := sampleResult()
	kres.Runs[1].APIServerRSSBytes, kres.Runs[0].IdleHeapBytesPerShard = 500<<20, []uint64{300 << 20}
	b.Reset()
	if err := WriteTable(&b, kres); err != nil {
		t.Fatal(err)
	}
	if out := b.String(); !regexp.MustCompile(`API server RSS.*500\.0 MiB`).MatchString(out) || !regexp.MustCompile(`idle heap per shard, mean.*300\.0 MiB`).MatchString(out) {
		t.Errorf("table with the API server's figures:\n%s", out)
	}
	p := filepath.Join(t.TempDir(), "r.html")
	if err := WriteHTML(p, res); err != nil {
		t.Fatal(err)
	}
	html, _ := os.ReadFile(p)
	if n := bytes.Count(html, []byte("<polyline")); n != 2 {
		t.Errorf("%d CDF lines, want 2", n)
	}
	if n := bytes.Count(html, []byte("<title>")); n != 1+10 {
		t.Errorf("%d titles (page + 10 bars), want 11", n)
	}
	// Self-contained: no external references.
	if regexp.MustCompile(`(src|href)=`).Match(html) {
		t.Error("report references external assets")
	}
}

func TestCDF(t *testing.T) {
	h := newHistogram()
	for i := 1; i <= 10000; i++ {
		h.record(time.Duration(i) * time.Microsecond)
	}
	pts := cdf(h.h, 50)
	if len(pts) < 50 || len(pts) > 200 || pts[len(pts)-1].Fraction != 1 {
		t.Fatalf("%d points, last %+v", len(pts), pts[len(pts)-1])
	}
	for i := 1; i < len(pts); i++ {
		if pts[i].Ms < pts[i-1].Ms || pts[i].Fraction < pts[i-1].Fraction {
			t.Fatalf("not monotonic at %d: %+v %+v", i, pts[i-1], pts[i])
		}
	}
	for _, p := range pts {
		if p.Fraction >= 0.5 {
			if p.Ms < 4.8 || p.Ms > 5.3 {
				t.Errorf("median point %+v", p)
			}
			break
		}
	}
}

func TestMain(m *testing.M) { os.Exit(testutil.Main(m, nil)) }

func TestAddrViewApply(t *testing.T) {
	a := netip.MustParseAddrPort("10.0.0.1:8080")
	b := netip.MustParseAddrPort("10.0.0.2:8080")
	add := &pb.Update{Update: &pb.Update_Add{Add: &pb.WeightedAddrSet{Addrs: []*pb.WeightedAddr{
		{Addr: wire.TCPAddr(a)}, {Addr: wire.TCPAddr(b)},
	}}}}
	rm := func(ap netip.AddrPort) *pb.Update {
		return &pb.Update{Update: &pb.Update_Remove{Remove: &pb.AddrSet{Addrs: []*pbnet.TcpAddress{wire.TCPAddr(ap)}}}}
	}
	v := addrView{}
	var seen []string
	rec := func(ap netip.AddrPort, added bool) { seen = append(seen, fmt.Sprint(ap, added)) }
	if err := v.apply(add, rec); err != nil {
		t.Fatal(err)
	}
	if err := v.apply(rm(a), rec); err != nil {
		t.Fatal(err)
	}
	if want := []string{"10.0.0.1:8080 true", "10.0.0.2:8080 true", "10.0.0.1:8080 false"}; !slices.Equal(seen, want) {
		t.Fatalf("seen %q, want %q", seen, want)
	}
	if len(v) != 1 {
		t.Fatalf("view holds %d addresses, want 1", len(v))
	}
	if err := v.apply(rm(a), nil); err == nil || !strings.Contains(err.Error(), "never added") {
		t.Fatalf("remove of an address not held: err %v", err)
	}
	if err := v.apply(&pb.Update{Update: &pb.Update_Add{Add: &pb.WeightedAddrSet{Addrs: []*pb.WeightedAddr{{}}}}}, nil); err == nil {
		t.Fatal("add of an address without an IP: no error")
	}
	if err := v.apply(&pb.Update{Update: &pb.Update_NoEndpoints{NoEndpoints: &pb.NoEndpoints{Exists: true}}}, nil); err != nil || len(v) != 0 {
		t.Fatalf("NoEndpoints: err %v, %d addresses left", err, len(v))
	}
	if err := v.apply(&pb.Update{}, nil); err == nil {
		t.Fatal("update of no kind: no error")
	}
}

func TestTimeline(t *testing.T) {
	start := time.Now()
	tl := timeline{start: start}
	tl.record(start.Add(500*time.Millisecond), 5*time.Millisecond)
	tl.record(start.Add(1200*time.Millisecond), 30*time.Millisecond)
	tl.record(start.Add(1500*time.Millisecond), 10*time.Millisecond)
	tl.record(start.Add(-time.Second), time.Millisecond) // before the start: second 0
	want := []SecondLatency{{Second: 0, Samples: 2, Slow: 0, MaxMs: 5}, {Second: 1, Samples: 2, Slow: 1, MaxMs: 30}}
	if !slices.Equal(tl.secs, want) {
		t.Fatalf("timeline %+v, want %+v", tl.secs, want)
	}
}

// TestSlowSchedWaits: the goroutine waits over the bucket bound at about 117 ms are counted
// from the Go collector's go_sched_latencies_seconds, as it exposes them.
func TestSlowSchedWaits(t *testing.T) {
	text := `# TYPE go_sched_latencies_seconds histogram
go_sched_latencies_seconds_bucket{le="6.399999999999999e-08"} 10
go_sched_latencies_seconds_bucket{le="0.010485759999999998"} 90
go_sched_latencies_seconds_bucket{le="0.11744051199999998"} 95
go_sched_latencies_seconds_bucket{le="+Inf"} 102
go_sched_latencies_seconds_sum NaN
go_sched_latencies_seconds_count 102
`
	m, err := parseMetrics(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	if got := slowSchedWaits(m); got != 7 {
		t.Errorf("slowSchedWaits = %d, want 7", got)
	}
	if got := slowSchedWaits(map[string]float64{}); got != 0 {
		t.Errorf("slowSchedWaits without the metric = %d, want 0", got)
	}
}

// TestClientMovesToReadyReplicas: a stream on a killed replica moves to a live replica that
// is ready, picked by its connection slot, never to one still starting (which a proxy
// reconnecting through the destination Service could not reach); redirects may still name
// the one starting.
func TestClientMovesToReadyReplicas(t *testing.T) {
	l := newLoad(gen.DefaultConfig(), 4)
	l.conns = make([][]*grpc.ClientConn, 4)
	for i := range 4 {
		cc, err := grpc.NewClient("passthrough:///replica", grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cc.Close() })
		l.setReplica(i, fmt.Sprintf("127.0.0.1:%d", 1000+i), []*grpc.ClientConn{cc})
	}
	l.ready[0].Store(true)
	l.ready[1].Store(true)
	l.ready[2].Store(true) // 3 is starting
	l.dead[0].Store(true)
	for slot := range 8 {
		st := &stream{slot: slot}
		if _, r := l.client(st); r != 1+slot%2 {
			t.Errorf("slot %d moved to replica %d, want %d (the ready ones, 1 and 2, by slot)", slot, r, 1+slot%2)
		}
	}
	if i, ok := l.replicaAt("127.0.0.1:1003"); !ok || i != 3 {
		t.Errorf("replicaAt(the starting replica) = %d, %v; want 3, true", i, ok)
	}
}

// TestStormCountsEveryStream: when the run ends, the storm's streams that answered are
// recorded whatever the order they answered in, and those that never did are counted.
func TestStormCountsEveryStream(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Storm, cfg.StreamsPerConn = 3, 1
	l := newLoad(cfg.Cluster, 1)
	ctx, cancel := context.WithCancel(context.Background())
	var sts []*stream
	open := func(svc, slot int, profile, measure bool) *stream {
		st := &stream{svc: svc, profile: profile, firstBatch: make(chan struct{}), opened: time.Now()}
		if len(sts) > 0 { // the first never answers; the others do
			st.firstAt = st.opened.Add(time.Millisecond)
			close(st.firstBatch)
		}
		sts = append(sts, st)
		return st
	}
	done := make(chan bool, 1)
	go func() { done <- l.stormRun(ctx, cfg, 1, open) }()
	cancel()
	select {
	case all := <-done:
		if all {
			t.Error("stormRun said every stream answered")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the storm did not end with its context")
	}
	if n, u := l.storm.h.TotalCount(), l.stormUnanswered.Load(); n != 5 || u != 1 {
		t.Errorf("%d storm streams recorded, %d unanswered; want 5 and 1", n, u)
	}
	// When every stream answers, it says so.
	sts = sts[:1:1]
	if !l.stormRun(context.Background(), cfg, 1, open) {
		t.Error("stormRun of streams that all answered said some did not")
	}
}

// TestAwaitJoin: a run is joined only once its joining replica is ready; one that failed to
// start fails the run.
func TestAwaitJoin(t *testing.T) {
	for _, joinErr := range []error{nil, errors.New("exec: no such file")} {
		r := newRun(context.Background(), DefaultConfig(), 1, zap.NewNop())
		if err := r.awaitJoin(); err != nil || r.res.Joined {
			t.Fatalf("no join: %v, joined %v", err, r.res.Joined)
		}
		r.joined = make(chan struct{})
		r.joinErr = joinErr
		close(r.joined)
		err := r.awaitJoin()
		if (err != nil) != (joinErr != nil) || r.res.Joined != (joinErr == nil) {
			t.Errorf("join error %v: awaitJoin %v, joined %v", joinErr, err, r.res.Joined)
		}
	}
}

// TestChurnCPU: the replicas' churn CPU counts each from its own start of churn, the one that
// joined from its start, and the killed one up to its kill.
func TestChurnCPU(t *testing.T) {
	r := newRun(context.Background(), DefaultConfig(), 2, zap.NewNop())
	r.baseline.replicaCPU = []float64{10, 20}
	rep := func(i int) *replica { return &replica{spec: ReplicaSpec{Index: i}} }
	if got := r.replicaCPUSince(rep(1), 25); got != 5 {
		t.Errorf("replica 1: %g CPU seconds, want 5", got)
	}
	if got := r.replicaCPUSince(rep(2), 3); got != 3 {
		t.Errorf("the joined replica: %g CPU seconds, want 3", got)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "process_cpu_seconds_total 27")
	}))
	defer srv.Close()
	killed := rep(1)
	killed.spec.AdminAddr = strings.TrimPrefix(srv.URL, "http://")
	r.readKilledCPU(killed)
	if r.baseline.killedCPU != 7 {
		t.Errorf("the killed replica: %g CPU seconds in churn, want 7", r.baseline.killedCPU)
	}
}

// TestStormCPU: the storm's CPU counts a process only when both readings saw it (a replica
// killed or started during the storm would otherwise add its whole life, or take it away),
// and its share is of what every CPU could give over the span.
func TestStormCPU(t *testing.T) {
	before := map[int]float64{10: 1.0, 11: 2.0, 12: 5.0}  // 12 is killed during the storm
	after := map[int]float64{10: 1.25, 11: 2.5, 13: 0.75} // 13 starts during it
	if got := spent(before, after); got != 0.75 {
		t.Errorf("spent = %v, want 0.75 (10 and 11 only)", got)
	}
	var res RunResult
	(*stormUse)(nil).fill(&res)
	(&stormUse{}).fill(&res) // no span: nothing to report
	if res.StormSpanMs != 0 || res.StormCPUShare != 0 {
		t.Errorf("an empty storm use filled a span of %v ms, a share of %v", res.StormSpanMs, res.StormCPUShare)
	}
	(&stormUse{spanSeconds: 0.5, replicas: 0.5, driver: 0.25, world: 0.125, cpus: 2}).fill(&res)
	if res.StormSpanMs != 500 || res.StormCPUSecondsReplicas != 0.5 || res.StormCPUSecondsDriver != 0.25 || res.StormCPUSecondsAPI != 0.125 || res.StormCPUShare != 0.875 {
		t.Errorf("filled %v ms, %v/%v/%v CPU seconds, share %v; want 500, 0.5/0.25/0.125, 0.875",
			res.StormSpanMs, res.StormCPUSecondsReplicas, res.StormCPUSecondsDriver, res.StormCPUSecondsAPI, res.StormCPUShare)
	}
}
