package bench

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/meridian-mesh/meridian/internal/child"
)

// ReplicaSpec is what one replica process is started with.
type ReplicaSpec struct {
	Index int
	// FeedAddr is the harness's feed server (--source feed:ADDR); Kubeconfig, when set
	// instead, a kubeconfig file of the API server (--source kubernetes).
	FeedAddr, Kubeconfig        string
	Addr, AdminAddr, GossipAddr string
	// Seed is the gossip address of replica 0, which every replica joins.
	Seed string
	// GossipKeyFile holds the run's gossip key (one per run, generated), passed with the
	// ring flags.
	GossipKeyFile string
	// Ring says whether to pass the ring flags.
	Ring bool
	// NonOwner is the --non-owner mode with the ring ("" means forward).
	NonOwner string
	// Expect is the run's replica count with the ring (--ring-expect-replicas; 0: none):
	// replicas started together each wait for the ring to form before they load their share.
	Expect int
	// GOMAXPROCS is the replica's (0: Go's default).
	GOMAXPROCS int
}

// ReplicaArgs returns the arguments of `meridian` for one replica. This is the one place
// that knows the destination subcommand's flags.
func ReplicaArgs(s ReplicaSpec) []string {
	src := []string{"--source", "feed:" + s.FeedAddr}
	if s.Kubeconfig != "" {
		src = []string{"--source", "kubernetes", "--kubeconfig", s.Kubeconfig}
	}
	args := append([]string{"destination"}, src...)
	args = append(args,
		"--addr", s.Addr,
		"--admin-addr", s.AdminAddr,
		"--log-level", "warn",
		"--log-format", "console",
		// The harness reads every replica over /debug/pprof/: each measurement forces a
		// collection first (heap?gc=1, see scrape), and --profile-dir takes CPU and heap
		// profiles. The replicas listen on 127.0.0.1 only.
		"--enable-pprof",
		// Plaintext gRPC: the harness's clients and the replicas' relays stay on 127.0.0.1,
		// in one user's processes, and measure the Destination server without TLS in the
		// way (a handshake per connection, then AES-GCM, which the control plane's mTLS adds
		// in a cluster). The replicas list it in /ready's warnings.
		"--plaintext",
	)
	if s.Ring {
		nonOwner := s.NonOwner
		if nonOwner == "" {
			nonOwner = "forward"
		}
		args = append(args,
			"--node-name", "shard"+strconv.Itoa(s.Index),
			"--gossip-addr", s.GossipAddr,
			"--join", s.Seed,
			"--gossip-key-file", s.GossipKeyFile,
			"--non-owner", nonOwner,
		)
		if s.Expect > 0 {
			args = append(args, "--ring-expect-replicas", strconv.Itoa(s.Expect))
		}
	}
	return args
}

// writeGossipKey writes a fresh random gossip key (32 bytes, base64) to dir/gossip.key,
// readable by this user only, and returns its path.
func writeGossipKey(dir string) (string, error) {
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		return "", err
	}
	p := filepath.Join(dir, "gossip.key")
	if err := os.WriteFile(p, []byte(base64.StdEncoding.EncodeToString(k)+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("write the gossip key: %w", err)
	}
	return p, nil
}

// replica is a running replica process.
type replica struct {
	spec ReplicaSpec
	*child.Proc
}

// startReplica starts a replica process whose output goes to dir/shardI.log.
func startReplica(binary, dir string, spec ReplicaSpec, extra []string) (*replica, error) {
	env := append(os.Environ(), "GOTRACEBACK=all")
	if spec.GOMAXPROCS > 0 {
		env = append(env, "GOMAXPROCS="+strconv.Itoa(spec.GOMAXPROCS))
	}
	p, err := child.Start("replica "+strconv.Itoa(spec.Index), binary, append(ReplicaArgs(spec), extra...),
		child.Options{Env: env, Log: filepath.Join(dir, "shard"+strconv.Itoa(spec.Index)+".log"), Truncate: true})
	if err != nil {
		return nil, err
	}
	return &replica{spec: spec, Proc: p}, nil
}

var httpClient = &http.Client{Timeout: 30 * time.Second}

// waitReady polls the replica's /ready until it answers 200, the process exits, or timeout.
func (r *replica) waitReady(ctx context.Context, timeout time.Duration) error {
	return r.WaitHTTP(ctx, httpClient, "http://"+r.spec.AdminAddr+"/ready", timeout, "ready")
}

// waitLive polls the replica's /live until it answers 200 (the process is up and listens),
// the process exits, or timeout.
func (r *replica) waitLive(ctx context.Context, timeout time.Duration) error {
	return r.WaitHTTP(ctx, httpClient, "http://"+r.spec.AdminAddr+"/live", timeout, "live")
}

// procStats are the figures read from a replica's /metrics.
type procStats struct {
	// HeapLive is the heap the forced collection found live (go_gc_heap_live_bytes); HeapAlloc
	// adds what was allocated after it, by the heap profile's encoding and the scrape itself.
	HeapLive, HeapAlloc, HeapInuse, RSS uint64
	CPUSeconds                          float64
	Coalescings                         uint64
	OwnershipChanges                    uint64
	Handovers                           uint64
	Forwarded                           uint64
	OwnedServices                       uint64
	// Suspected and DeclaredFailed are the replica's failure-detector counts
	// (ring_failure_detector_events_total): its probes of a peer that went unanswered, and
	// suspicions it held until they timed out (a member dropped from its ring).
	Suspected, DeclaredFailed uint64
	// SlowSchedWaits counts the replica's goroutines that waited over schedSlowBound to run
	// since it started (go_sched_latencies_seconds): a replica starved of CPU, whose gossip
	// probes then go unanswered.
	SlowSchedWaits uint64
	// HeldDead and Revived: peers declared dead that still accepted connections, which the
	// replica kept in its ring for the hold, and those of them that came back (a flap avoided).
	HeldDead, Revived uint64
	// PodGets and PodRecent: the pods the replica read one at a time because a slice started
	// naming a pod it had dropped (destination_source_pod_reads_total), with a GET, and from
	// the copy its watch had dropped lately, without a request.
	PodGets, PodRecent uint64
}

// schedSlowBound is the go_sched_latencies_seconds bucket bound (the Go collector's, about
// 117 ms) above which a goroutine's wait to run counts as slow: half of it is a gossip
// probe's timeout at the default 500 ms probe interval.
const schedSlowBound = 0.11744051199999998

// slowSchedWaits returns, from a scrape, how many goroutine waits to run were over the
// largest go_sched_latencies_seconds bucket bound at most schedSlowBound (0 without the metric).
func slowSchedWaits(m map[string]float64) uint64 {
	const prefix = `go_sched_latencies_seconds_bucket{le="`
	bound, under := -1.0, 0.0
	for k, v := range m {
		if !strings.HasPrefix(k, prefix) {
			continue
		}
		le, err := strconv.ParseFloat(strings.TrimSuffix(k[len(prefix):], `"}`), 64)
		if err == nil && le <= schedSlowBound*1.001 && le > bound {
			bound, under = le, v
		}
	}
	total, ok := m["go_sched_latencies_seconds_count"]
	if !ok || bound < 0 || total < under {
		return 0
	}
	return uint64(total - under)
}

// scrape forces a garbage collection in the replica (pprof's heap profile with gc=1, which
// the admin server serves) and then reads its /metrics.
// When heapProfile is not empty, the heap profile (taken after that collection) is saved
// there.
func (r *replica) scrape(ctx context.Context, heapProfile string) (procStats, error) {
	var st procStats
	get := func(path string, fn func(io.Reader) error) error {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+r.spec.AdminAddr+path, nil)
		resp, err := httpClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %s", path, resp.Status)
		}
		return fn(resp.Body)
	}
	saveHeap := func(body io.Reader) error {
		if heapProfile == "" {
			_, err := io.Copy(io.Discard, body)
			return err
		}
		f, err := os.Create(heapProfile)
		if err != nil {
			return err
		}
		if _, err := io.Copy(f, io.LimitReader(body, 256<<20)); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	}
	if err := get("/debug/pprof/heap?gc=1", saveHeap); err != nil {
		return st, fmt.Errorf("replica %d: %w", r.spec.Index, err)
	}
	m, err := r.metrics(ctx)
	if err != nil {
		return st, err
	}
	st.HeapAlloc = uint64(m["go_memstats_heap_alloc_bytes"])
	live, ok := m["go_gc_heap_live_bytes"]
	if !ok { // replicas run the harness's own binary, which exports it (internal/serve)
		return st, fmt.Errorf("replica %d: no go_gc_heap_live_bytes in /metrics", r.spec.Index)
	}
	st.HeapLive = uint64(live)
	st.HeapInuse = uint64(m["go_memstats_heap_inuse_bytes"])
	st.RSS = uint64(m["process_resident_memory_bytes"])
	st.CPUSeconds = m["process_cpu_seconds_total"]
	st.Coalescings = uint64(m["endpoint_updates_queue_overflow"])
	// The sharding metrics (absent from a replica without a ring: zero).
	st.OwnershipChanges = uint64(m["destination_ownership_changes_total"])
	st.Handovers = uint64(m["destination_stream_handovers_total"])
	st.Forwarded = uint64(m["destination_forwarded_streams"])
	st.OwnedServices = uint64(m["destination_owned_services"])
	st.Suspected = uint64(m[`ring_failure_detector_events_total{event="suspected"}`])
	st.DeclaredFailed = uint64(m[`ring_failure_detector_events_total{event="declared_failed"}`])
	st.SlowSchedWaits = slowSchedWaits(m)
	st.HeldDead = uint64(m[`ring_failure_detector_events_total{event="dead_reachable"}`])
	st.Revived = uint64(m[`ring_failure_detector_events_total{event="dead_revived"}`])
	for _, r := range []string{"found", "gone", "failed"} {
		st.PodGets += uint64(m[`destination_source_pod_reads_total{result="`+r+`"}`])
	}
	st.PodRecent = uint64(m[`destination_source_pod_reads_total{result="recent"}`])
	return st, nil
}

// metrics reads the replica's /metrics.
func (r *replica) metrics(ctx context.Context) (map[string]float64, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+r.spec.AdminAddr+"/metrics", nil)
	resp, err := httpClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("replica %d: %w", r.spec.Index, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("replica %d: GET /metrics: %s", r.spec.Index, resp.Status)
	}
	m, err := parseMetrics(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("replica %d: %w", r.spec.Index, err)
	}
	return m, nil
}

// cpuProfile saves the replica's CPU profile over the next d (pprof's /debug/pprof/profile)
// to path.
func (r *replica) cpuProfile(ctx context.Context, d time.Duration, path string) error {
	secs := max(1, int(d.Round(time.Second)/time.Second))
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+r.spec.AdminAddr+"/debug/pprof/profile?seconds="+strconv.Itoa(secs), nil)
	resp, err := profileClient.Do(req)
	if err != nil {
		return fmt.Errorf("replica %d: CPU profile: %w", r.spec.Index, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("replica %d: CPU profile: %s", r.spec.Index, resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, io.LimitReader(resp.Body, 256<<20)); err != nil {
		f.Close()
		return fmt.Errorf("replica %d: CPU profile: %w", r.spec.Index, err)
	}
	return f.Close()
}

// profileClient has no timeout of its own: a CPU profile takes as long as it was asked to.
var profileClient = &http.Client{}

// parseMetrics reads Prometheus text exposition and returns, per metric name, the sum of its
// samples over all label sets, and per labelled series (`name{labels}` as the exposition
// writes it) its own value. It reads at most 64 MiB.
func parseMetrics(r io.Reader) (map[string]float64, error) {
	out := map[string]float64{}
	sc := bufio.NewScanner(io.LimitReader(r, 64<<20))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		name, rest, series := line, "", ""
		if i := strings.IndexAny(line, "{ "); i >= 0 {
			name, rest = line[:i], line[i:]
		}
		if strings.HasPrefix(rest, "{") {
			j := strings.LastIndexByte(rest, '}')
			if j < 0 {
				return nil, fmt.Errorf("metrics: unterminated labels in %q", line)
			}
			series = name + rest[:j+1]
			rest = rest[j+1:]
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			return nil, fmt.Errorf("metrics: no value in %q", line)
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return nil, fmt.Errorf("metrics: value in %q: %w", line, err)
		}
		out[name] += v
		if series != "" {
			out[series] += v
		}
	}
	if err := sc.Err(); err != nil {
		return nil, errors.Join(errors.New("metrics"), err)
	}
	return out, nil
}
