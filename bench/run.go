package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"sync"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
)

// Run runs the workload at each of cfg.Shards in turn and returns what it measured. On error
// it returns what it measured so far.
func Run(ctx context.Context, cfg Config, log *zap.Logger) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.ProfileDir != "" { // made now: a run can take an hour to reach its first profile
		if err := os.MkdirAll(cfg.ProfileDir, 0o755); err != nil {
			return nil, fmt.Errorf("profile directory: %w", err)
		}
	}
	if log == nil {
		log = zap.NewNop()
	}
	// The harness stands in for every proxy of a cluster, which would run on other machines;
	// here it shares the replicas' CPUs, and each of its collections (20,000 stream
	// goroutines, every view) delays the receipt of updates it is timing. Collecting a
	// quarter as often keeps that out of the figures; the heap it takes is reported.
	defer debug.SetGCPercent(debug.SetGCPercent(DriverGOGC))
	res := &Result{
		Source:  cfg.Source,
		Cluster: cfg.Cluster, Streams: cfg.Streams, StreamsPerConn: cfg.StreamsPerConn,
		ChurnPerSecond: cfg.Churn, DurationS: cfg.Duration.Seconds(), Storm: cfg.Storm,
	}
	// The feed source gets a fresh cluster per run; a real API server is started, and its
	// cluster created, once for all runs (they start from where the last one's churn left it).
	var shared world
	if cfg.Source == SourceKubernetes {
		kw, err := startKubeWorld(ctx, cfg, log)
		if err != nil {
			return nil, err
		}
		defer kw.stop(log)
		res.ClusterCreateSeconds = kw.createSeconds
		shared = kw
	}
	for _, n := range cfg.Shards {
		r, err := runOne(ctx, cfg, shared, n, log.With(zap.Int("shards", n)))
		if r != nil {
			res.Runs = append(res.Runs, *r)
		}
		if err != nil {
			return res, fmt.Errorf("%d shards: %w", n, err)
		}
	}
	return res, nil
}

// DriverGOGC is the harness's GOGC while it runs.
const DriverGOGC = 400

// runOne runs the workload with n replicas: it starts the feed server (unless shared, the
// API server's world, is given) and the replicas (startReplicas), measures their idle heap
// (measureIdle), opens the streams (openStreams), applies churn with the storm, join and
// kill on the way (churn), waits for the joining replica (awaitJoin) and for every stream to
// reach the truth (settle), and measures
// the replicas and itself (measure, collect). When the streams took longer than
// cfg.MaxKillConverge to recover from the kill, it returns what it measured with an error.
func runOne(parent context.Context, cfg Config, shared world, n int, log *zap.Logger) (_ *RunResult, err error) {
	if cfg.KillAt > 0 && n < 2 {
		return nil, errors.New("--kill-at needs at least 2 shards")
	}
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	r := newRun(ctx, cfg, n, log)
	// What the run starts stops in the reverse order: the streams, their connections, the
	// replicas and their logs; then ctx ends and bg's goroutines (the feed server, a joining
	// replica) are waited for.
	defer r.bg.Wait()
	defer cancel()
	if r.world = shared; r.world == nil {
		if r.world, err = newFeedWorld(ctx, cfg, &r.bg, log); err != nil {
			return nil, err
		}
	}
	if r.dir, err = os.MkdirTemp("", "meridian-bench-"); err != nil {
		return nil, err
	}
	defer func() { r.dropLogs(err) }()
	if r.gossipKey, err = writeGossipKey(r.dir); err != nil {
		return nil, err
	}
	defer r.reps.stop()
	defer r.closeConns()
	defer r.stopStreams()
	for _, step := range []func() error{r.startReplicas, r.measureIdle, r.openStreams, r.readBaseline, r.churn, r.awaitJoin, r.settle, r.measure} {
		if err := step(); err != nil {
			return nil, err
		}
	}
	r.collect()
	if limit := r.cfg.MaxKillConverge; limit > 0 && r.res.Killed && (r.res.KillUnconverged || r.res.KillConvergeSeconds > limit.Seconds()) {
		return r.res, fmt.Errorf("the streams took %.1fs to hold the truth again after the kill (converged: %v), over --max-kill-converge %s",
			r.res.KillConvergeSeconds, !r.res.KillUnconverged, limit)
	}
	return r.res, nil
}

// run is what the phases of one runOne share. The phases run one after the other on runOne's
// goroutine. Of the goroutines they start, bg owns the feed server's and a joining replica's,
// storm the storm's, and ld.wg the streams'; runOne waits for all of them before it returns.
type run struct {
	cfg  Config
	n    int // replicas started before churn
	ring bool
	log  *zap.Logger
	ctx  context.Context // ends when runOne returns
	res  *RunResult

	world world
	dir   string // the replicas' logs
	reps  fleet
	seed  string // replica 0's gossip address, which every replica joins
	// gossipKey is the file of the run's gossip key, in dir.
	gossipKey string
	bg        sync.WaitGroup

	ld         *load
	sctx       context.Context // the streams'
	cancelSctx context.CancelFunc
	storm      sync.WaitGroup
	stormUse   *stormUse // written by the storm's goroutine, read after storm.Wait
	baseline   usage     // at the start of churn
	// joined is closed once the replica joining during churn is ready or failed (joinErr);
	// nil until it starts.
	joined  chan struct{}
	joinErr error
	kill    *killWatch // from the kill, when there is one
}

// newRun returns the state of a run of n replicas (its world is set by runOne).
func newRun(ctx context.Context, cfg Config, n int, log *zap.Logger) *run {
	r := &run{
		cfg: cfg, n: n, ring: cfg.Ring || n > 1 || cfg.JoinAt > 0, log: log, ctx: ctx,
		res: &RunResult{Shards: n, NonOwner: cfg.NonOwner, ReplicaGOMAXPROCS: cfg.replicaProcs(n, runtime.NumCPU())},
		ld:  newLoad(cfg.Cluster, n+joining(cfg)),
	}
	r.ld.conns = make([][]*grpc.ClientConn, n+joining(cfg))
	r.sctx, r.cancelSctx = context.WithCancel(ctx)
	return r
}

// joining is 1 when a replica joins during churn (cfg.JoinAt), else 0.
func joining(cfg Config) int {
	if cfg.JoinAt > 0 {
		return 1
	}
	return 0
}

// dropLogs removes the replicas' log directory after a successful run (unless asked to keep
// it) and otherwise says where it is.
func (r *run) dropLogs(err error) {
	if err == nil && !r.cfg.KeepLogs {
		os.RemoveAll(r.dir)
	} else {
		fmt.Fprintf(os.Stderr, "bench: replica logs kept in %s\n", r.dir)
	}
}

// stopStreams ends every stream and waits for their goroutines and the storm's. It may be
// called more than once.
func (r *run) stopStreams() {
	r.cancelSctx()
	r.storm.Wait() // it opens streams: done before ld.wg is waited for
	r.ld.wg.Wait()
}

func (r *run) closeConns() {
	r.ld.connMu.RLock()
	defer r.ld.connMu.RUnlock()
	for _, cs := range r.ld.conns {
		for _, c := range cs {
			c.Close()
		}
	}
}

// open opens a stream of service svc on connection slot (spread over replicas) and follows
// it until the streams are stopped.
func (r *run) open(svc, slot int, profile, measure bool) *stream {
	st := &stream{svc: svc, slot: slot / r.n, profile: profile, measure: measure, firstBatch: make(chan struct{}), opened: time.Now()}
	st.replica.Store(int32(slot % r.n))
	r.ld.mu.Lock()
	r.ld.streams = append(r.ld.streams, st)
	r.ld.mu.Unlock()
	r.ld.wg.Add(1)
	go r.ld.run(r.sctx, st)
	return st
}
