package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/meridian-mesh/meridian/bench/gen"
	"github.com/meridian-mesh/meridian/internal/testutil"
)

// testConfig is a small run of the tests, on cluster: 200 streams, 20 a connection, a storm
// of 20 (checkRun expects 40 storm streams), churn of churn changes a second for duration,
// with ./cmd/meridian built for the replicas.
func testConfig(t *testing.T, cluster gen.Config, churn float64, duration time.Duration) Config {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Cluster = cluster
	cfg.Streams, cfg.StreamsPerConn = 200, 20
	cfg.Churn, cfg.Duration = churn, duration
	cfg.Storm = 20
	cfg.Settle = 30 * time.Second
	cfg.ReadyTimeout = 2 * time.Minute
	cfg.Binary = testutil.BuildMeridian(t)
	return cfg
}

// mustRun runs the harness with cfg, logging to t; it fails t when the run fails.
func mustRun(ctx context.Context, t *testing.T, cfg Config) *Result {
	t.Helper()
	res, err := Run(ctx, cfg, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func smokeConfig(t *testing.T) Config {
	cfg := testConfig(t, gen.Config{Seed: 7, Services: 50, EndpointsPerService: 10, Namespaces: 5, MeshedShare: 0.8, ControlPlaneNamespace: "linkerd"}, 50, 2*time.Second)
	cfg.Shards = []int{1, 2}
	return cfg
}

func TestSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts replica processes")
	}
	cfg := smokeConfig(t)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	res := mustRun(ctx, t, cfg)
	if len(res.Runs) != 2 {
		t.Fatalf("%d runs", len(res.Runs))
	}
	for _, r := range res.Runs {
		checkRun(t, r, cfg.Cluster.Services)
	}
	// Redirect mode: clients follow the owner named in the trailer.
	// Profiles of the replicas and the harness too.
	rcfg := cfg
	rcfg.Shards, rcfg.NonOwner, rcfg.ProfileDir = []int{2}, "redirect", filepath.Join(t.TempDir(), "profiles") // made by the run
	rres := mustRun(ctx, t, rcfg)
	checkRun(t, rres.Runs[0], cfg.Cluster.Services)
	for _, name := range []string{"shards2-driver.cpu.pb.gz", "shards2-shard0.cpu.pb.gz", "shards2-shard1.cpu.pb.gz", "shards2-shard0.heap.pb.gz"} {
		if n, err := testutil.GunzipLen(filepath.Join(rcfg.ProfileDir, name)); err != nil || n == 0 {
			t.Errorf("%s: %d bytes of profile, err %v", name, n, err)
		}
	}
	if rres.Runs[0].Redirects == 0 || rres.Runs[0].ForwardedStreams != 0 {
		t.Errorf("redirect mode: %d redirects, %d forwarded streams", rres.Runs[0].Redirects, rres.Runs[0].ForwardedStreams)
	}
	res.Runs = append(res.Runs, rres.Runs[0])

	// A replica joins and another is killed during churn: the streams follow their services,
	// forwarded and redirected. A redirected stream may be sent to the killed replica, or
	// between replicas that disagree, until every failure detector has seen the kill: it
	// follows redirects as a proxy does (three at once, then after a delay) and gets there.
	for _, mode := range []string{"forward", "redirect"} {
		jcfg := cfg
		jcfg.Shards, jcfg.JoinAt, jcfg.KillAt, jcfg.Storm, jcfg.NonOwner = []int{2}, 500*time.Millisecond, 1500*time.Millisecond, 0, mode
		// The assertion is exercised with a bound no run on a loaded machine reaches (a timing is
		// reported, not asserted).
		jcfg.MaxKillConverge = 2 * time.Minute
		jres := mustRun(ctx, t, jcfg)
		j := jres.Runs[0]
		if !j.Joined || !j.Killed || j.FinalStateMismatches != 0 || j.StreamsClosed != 0 || j.ApplyErrors != 0 || j.OwnershipChanges == 0 || j.LatencyMissed != 0 {
			t.Errorf("join and kill, %s: joined %v, killed %v, mismatches %d, closed %d, apply errors %d, ownership changes %d, observations missed %d", mode,
				j.Joined, j.Killed, j.FinalStateMismatches, j.StreamsClosed, j.ApplyErrors, j.OwnershipChanges, j.LatencyMissed)
		}
		if j.CPUSecondsChurn <= 0 {
			t.Errorf("join and kill, %s: %.2f CPU seconds in churn", mode, j.CPUSecondsChurn)
		}
		// The time from the kill to every stream holding the truth is measured (its value is
		// reported, not asserted).
		if j.KillConvergeSeconds <= 0 || j.KillUnconverged {
			t.Errorf("join and kill, %s: kill convergence %.2fs, unconverged %v; want it measured and converged", mode, j.KillConvergeSeconds, j.KillUnconverged)
		}
		t.Logf("join and kill, %s: the streams held the truth again %.1fs after the kill", mode, j.KillConvergeSeconds)
		if mode == "forward" {
			res.Runs = append(res.Runs, j)
		}
	}

	dir := t.TempDir()
	jp, hp := filepath.Join(dir, "bench.json"), filepath.Join(dir, "bench.html")
	if err := WriteJSON(jp, res); err != nil {
		t.Fatal(err)
	}
	if err := WriteHTML(hp, res); err != nil {
		t.Fatal(err)
	}
	checkJSON(t, jp)
	checkKillJSON(t, jp)
	html, _ := os.ReadFile(hp)
	if !bytes.Contains(html, []byte("<polyline")) || !bytes.Contains(html, []byte("<rect")) {
		t.Error("report has no CDF or no bars")
	}
	var tbl bytes.Buffer
	if err := WriteTable(&tbl, res); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", tbl.String())
}

func checkRun(t *testing.T, r RunResult, services int) {
	t.Helper()
	if r.FinalStateMismatches != 0 || r.StreamsClosed != 0 || r.ApplyErrors != 0 {
		t.Errorf("%d shards: mismatches %d, streams closed %d, apply errors %d", r.Shards, r.FinalStateMismatches, r.StreamsClosed, r.ApplyErrors)
	}
	if r.BytesReceived == 0 || r.UpdatesReceived == 0 {
		t.Errorf("%d bytes, %d updates received", r.BytesReceived, r.UpdatesReceived)
	}
	if r.ChangesApplied == 0 || r.LatencySamples == 0 {
		t.Errorf("changes %d, latency samples %d", r.ChangesApplied, r.LatencySamples)
	}
	if r.LatencyMissed != 0 {
		t.Errorf("%d observations missed", r.LatencyMissed)
	}
	if len(r.HeapBytesPerShard) != r.Shards || r.HeapBytesPerShard[0] == 0 || r.RSSBytesPerShard[0] == 0 {
		t.Errorf("heap %v, rss %v", r.HeapBytesPerShard, r.RSSBytesPerShard)
	}
	if r.StormStreams != 40 || r.StormUnanswered != 0 || r.StormMaxMs == 0 || r.StormGetP99Ms == 0 || r.StormGetP99Ms > r.StormMaxMs {
		t.Errorf("storm: %d streams (%d unanswered), max %.2f ms, Gets' p99 %.2f ms", r.StormStreams, r.StormUnanswered, r.StormMaxMs, r.StormGetP99Ms)
	}
	// The storm's span holds its slowest first message (the histogram may round that up by
	// 0.1%), the replicas and the harness spent some CPU over it, and the share of the
	// machine is at most about one (over 1.5 would be a unit gone wrong).
	if r.StormSpanMs < 0.99*r.StormMaxMs || r.StormCPUSecondsReplicas <= 0 || r.StormCPUSecondsDriver <= 0 || r.StormCPUShare <= 0 || r.StormCPUShare > 1.5 {
		t.Errorf("storm: span %.2f ms (slowest %.2f ms), CPU seconds %.4f replicas, %.4f driver, share %.2f",
			r.StormSpanMs, r.StormMaxMs, r.StormCPUSecondsReplicas, r.StormCPUSecondsDriver, r.StormCPUShare)
	}
	if r.Shards > 1 {
		owned := uint64(0)
		for _, n := range r.OwnedServicesPerShard {
			owned += n
		}
		if owned != uint64(services) {
			t.Errorf("%d shards own %v services, want %d in all", r.Shards, r.OwnedServicesPerShard, services)
		}
	}
}

// readRunsJSON returns the runs of the JSON file WriteJSON wrote, each as its fields.
func readRunsJSON(t *testing.T, path string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Runs []map[string]any `json:"runs"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	return doc.Runs
}

// checkKillJSON checks that the file's run with a kill has kill_converge_seconds.
func checkKillJSON(t *testing.T, path string) {
	t.Helper()
	for _, r := range readRunsJSON(t, path) {
		if r["killed"] == true {
			if v, ok := r["kill_converge_seconds"].(float64); !ok || v <= 0 {
				t.Errorf("the run with a kill has kill_converge_seconds %v", r["kill_converge_seconds"])
			}
			return
		}
	}
	t.Error("no run with a kill in the JSON")
}

// checkJSON checks that the file has the documented fields of every run.
func checkJSON(t *testing.T, path string) {
	t.Helper()
	runs := readRunsJSON(t, path)
	if len(runs) == 0 {
		t.Fatal("no runs in the JSON")
	}
	for _, k := range []string{"shards", "p50_ms", "p99_ms", "p999_ms", "max_ms", "heap_bytes_per_shard", "rss_bytes_per_shard", "changes_applied", "final_state_mismatches", "coalescings", "streams_closed"} {
		if _, ok := runs[0][k]; !ok {
			t.Errorf("JSON lacks %q", k)
		}
	}
}
