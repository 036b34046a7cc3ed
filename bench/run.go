package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/schollz/progressbar/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/meridian-mesh/meridian/bench/feed"
	"github.com/meridian-mesh/meridian/bench/gen"
)

// Run runs the workload at each of cfg.Shards in turn and returns what it measured. On error
// it returns what it measured so far.
func Run(ctx context.Context, cfg Config, log *zap.Logger) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
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
		Cluster: cfg.Cluster, Streams: cfg.Streams, StreamsPerConn: cfg.StreamsPerConn,
		ChurnPerSecond: cfg.Churn, DurationS: cfg.Duration.Seconds(), Storm: cfg.Storm,
	}
	for _, n := range cfg.Shards {
		r, err := runOne(ctx, cfg, n, log.With(zap.Int("shards", n)))
		if err != nil {
			return res, fmt.Errorf("%d shards: %w", n, err)
		}
		res.Runs = append(res.Runs, *r)
	}
	return res, nil
}

// DriverGOGC is the harness's GOGC while it runs.
const DriverGOGC = 400

// phase shows progress on cfg.Progress.
type phase struct{ bar *progressbar.ProgressBar }

func newPhase(cfg Config, max int64, desc string) *phase {
	if cfg.Progress == nil {
		return &phase{}
	}
	return &phase{bar: progressbar.NewOptions64(max,
		progressbar.OptionSetWriter(cfg.Progress),
		progressbar.OptionSetDescription(desc),
		progressbar.OptionSetWidth(30),
		progressbar.OptionThrottle(200*time.Millisecond),
		progressbar.OptionShowCount(),
		progressbar.OptionSetElapsedTime(true),
		progressbar.OptionOnCompletion(func() { fmt.Fprintln(cfg.Progress) }),
	)}
}

func (p *phase) set(n int64) {
	if p.bar != nil {
		_ = p.bar.Set64(n)
	}
}

func (p *phase) describe(s string) {
	if p.bar != nil {
		p.bar.Describe(s)
	}
}

func (p *phase) done() {
	if p.bar != nil {
		_ = p.bar.Finish()
	}
}

// runOne runs the workload with n replicas.
func runOne(parent context.Context, cfg Config, n int, log *zap.Logger) (_ *RunResult, err error) {
	if cfg.KillAt > 0 && n < 2 {
		return nil, errors.New("--kill-at needs at least 2 shards")
	}
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	res := &RunResult{Shards: n, NonOwner: cfg.NonOwner, ReplicaGOMAXPROCS: cfg.replicaProcs(n, runtime.NumCPU())}

	cluster, err := gen.NewCluster(cfg.Cluster)
	if err != nil {
		return nil, err
	}
	srv := feed.NewServer(cluster, feed.ServerConfig{QueueFrames: feed.DefaultQueueFrames, DeliverPods: cfg.DeliverPods}, log)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	var bg sync.WaitGroup // every goroutine of the run but the streams
	defer bg.Wait()
	defer cancel()
	bg.Add(1)
	go func() {
		defer bg.Done()
		if err := srv.Serve(ctx, lis); err != nil {
			log.Warn("feed server", zap.Error(err))
		}
	}()

	dir, err := os.MkdirTemp("", "meridian-bench-")
	if err != nil {
		return nil, err
	}
	defer func() {
		if err == nil && !cfg.KeepLogs {
			os.RemoveAll(dir)
		} else {
			fmt.Fprintf(os.Stderr, "bench: replica logs kept in %s\n", dir)
		}
	}()

	// Replicas.
	ring := cfg.Ring || n > 1 || cfg.JoinAt > 0
	var repMu sync.Mutex
	var reps []*replica
	repsClosed := false // set once the replicas are stopped: a late joiner stops itself
	defer func() {
		repMu.Lock()
		defer repMu.Unlock()
		repsClosed = true
		var wg sync.WaitGroup
		for _, r := range reps {
			wg.Add(1)
			go func() { defer wg.Done(); r.stop(5 * time.Second) }()
		}
		wg.Wait()
	}()
	var seed string
	newSpec := func(i int) (ReplicaSpec, error) {
		s := ReplicaSpec{Index: i, FeedAddr: lis.Addr().String(), Ring: ring, NonOwner: cfg.NonOwner, GOMAXPROCS: res.ReplicaGOMAXPROCS}
		var errs [3]error
		s.Addr, errs[0] = freeAddr()
		s.AdminAddr, errs[1] = freeAddr()
		s.GossipAddr, errs[2] = freeAddr()
		if i == 0 {
			seed = s.GossipAddr
		}
		s.Seed = seed
		return s, errors.Join(errs[:]...)
	}
	// startReady starts replica i and waits until it is ready. Its ports come from freeAddr,
	// which another process can take between the probe and the replica's bind, so a replica
	// that fails to bind is started again on fresh ports (bounded). It is added to reps once
	// ready, or stopped when the run is already over.
	startReady := func(i int) error {
		for attempt := 1; ; attempt++ {
			spec, err := newSpec(i)
			if err != nil {
				return err
			}
			r, err := startReplica(cfg.Binary, dir, spec, cfg.ExtraReplicaArgs)
			if err != nil {
				return err
			}
			if err = r.waitReady(ctx, cfg.ReadyTimeout); err != nil {
				r.kill()
				if attempt == 3 || !strings.Contains(err.Error(), "address already in use") {
					return err
				}
				continue
			}
			repMu.Lock()
			defer repMu.Unlock()
			if repsClosed {
				r.kill()
				return errors.New("the run ended while a replica started")
			}
			reps = append(reps, r)
			return nil
		}
	}
	syncStart := time.Now()
	ph := newPhase(cfg, int64(n), fmt.Sprintf("shards=%d: starting replicas", n))
	// One replica at a time, each ready before the next.
	for i := range n {
		if err := startReady(i); err != nil {
			return nil, err
		}
		ph.set(int64(i + 1))
	}
	byAddr := map[string]int{}
	for i, r := range reps {
		byAddr[r.spec.Addr] = i
	}
	ph.done()
	res.SyncSeconds = time.Since(syncStart).Seconds()

	// Connections and streams.
	ld := newLoad(cfg.Cluster, n)
	ld.byAddr = byAddr
	nconns := (cfg.Streams + cfg.StreamsPerConn - 1) / cfg.StreamsPerConn
	ld.conns = make([][]*grpc.ClientConn, n)
	defer func() {
		for _, cs := range ld.conns {
			for _, c := range cs {
				c.Close()
			}
		}
	}()
	for c := range max(nconns, n) {
		r := reps[c%n]
		cc, err := grpc.NewClient(r.spec.Addr,
			grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(256<<20)))
		if err != nil {
			return nil, err
		}
		ld.conns[c%n] = append(ld.conns[c%n], cc)
	}
	sctx, stopStreams := context.WithCancel(ctx)
	defer func() { stopStreams(); ld.wg.Wait() }()
	open := func(svc, slot int, profile, measure bool) *stream {
		st := &stream{svc: svc, slot: slot / n, profile: profile, measure: measure, firstBatch: make(chan struct{}), opened: time.Now()}
		st.replica.Store(int32(slot % n))
		ld.mu.Lock()
		ld.streams = append(ld.streams, st)
		ld.mu.Unlock()
		ld.wg.Add(1)
		go ld.run(sctx, st)
		return st
	}
	for s := range cfg.Streams {
		svc := s % cfg.Cluster.Services
		ld.subsPerSvc[svc]++
		open(svc, s/cfg.StreamsPerConn, false, true)
	}
	res.StreamsOpened = cfg.Streams
	ph = newPhase(cfg, int64(cfg.Streams), fmt.Sprintf("shards=%d: opening streams", n))
	deadline := time.After(cfg.ReadyTimeout)
	for i, st := range ld.streams {
		select {
		case <-st.firstBatch:
		case <-deadline:
			return nil, fmt.Errorf("stream %d (%s) had no first batch within %s", i, ld.paths[st.svc], cfg.ReadyTimeout)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if i%1000 == 0 {
			ph.set(int64(i))
		}
	}
	ph.set(int64(cfg.Streams))
	ph.done()

	cpu0 := 0.0
	driverWait0, _ := runqueueWait(0)
	driverCPU0, _ := selfCPUSeconds()
	var mst0 runtime.MemStats
	runtime.ReadMemStats(&mst0)
	for _, r := range reps {
		st, err := r.scrape(ctx, "")
		if err != nil {
			return nil, err
		}
		cpu0 += st.CPUSeconds
	}

	// Churn, with the storm, join and kill on the way.
	stormAt := cfg.StormAt
	if stormAt == 0 {
		stormAt = cfg.Duration / 2
	}
	rng := rand.New(rand.NewPCG(cfg.Cluster.Seed, uint64(n)))
	stopProfiles, err := startCPUProfiles(ctx, cfg, n, reps)
	if err != nil {
		return nil, err
	}
	ph = newPhase(cfg, max(cfg.Duration.Milliseconds(), 1), fmt.Sprintf("shards=%d: churn %g/s", n, cfg.Churn))
	start := time.Now()
	ld.timeline.mu.Lock()
	ld.timeline.start = start
	ld.timeline.mu.Unlock()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	stormDone, joined, killed := cfg.Storm == 0, cfg.JoinAt == 0, cfg.KillAt == 0
	var churnErr error
	for {
		el := time.Since(start)
		if !stormDone && el >= stormAt {
			stormDone = true
			ph.describe(fmt.Sprintf("shards=%d: storm of %d", n, cfg.Storm))
			bg.Add(1)
			go func() { defer bg.Done(); ld.stormRun(sctx, cfg, n, open) }()
			res.StormStreams = 2 * cfg.Storm
		}
		if !joined && el >= cfg.JoinAt {
			joined, res.Joined = true, true
			bg.Add(1)
			go func() {
				defer bg.Done()
				if err := startReady(n); err != nil && ctx.Err() == nil {
					ld.fail(err)
				}
			}()
		}
		if !killed && el >= cfg.KillAt {
			killed, res.Killed = true, true
			victim := n - 1
			ld.dead[victim].Store(true)
			repMu.Lock() // a joining replica may be appended meanwhile
			r := reps[victim]
			repMu.Unlock()
			r.kill()
		}
		if el >= cfg.Duration || churnErr != nil {
			break
		}
		due := int64(el.Seconds() * cfg.Churn)
		for k := 0; res.ChangesApplied < due && k < 10000; k++ {
			if _, _, err := srv.Apply(rng, ld.busy, ld.recordChange); err != nil {
				churnErr = err
				break
			}
			res.ChangesApplied++
		}
		ph.set(el.Milliseconds())
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-tick.C:
		}
	}
	ph.set(cfg.Duration.Milliseconds())
	ph.done()
	if err := stopProfiles(); err != nil {
		log.Warn("CPU profiles", zap.Error(err))
	}
	if churnErr != nil {
		return nil, fmt.Errorf("churn: %w", churnErr)
	}

	// Settle: wait for every stream to reach the truth.
	settleStart := time.Now()
	truth := func() map[int]map[netip.AddrPort]struct{} {
		out := map[int]map[netip.AddrPort]struct{}{}
		var buf []netip.AddrPort
		srv.Read(func(c *gen.Cluster) {
			for _, st := range ld.all() {
				if _, ok := out[st.svc]; ok || st.profile {
					continue
				}
				buf = c.ReadyAddrs(buf[:0], st.svc)
				m := make(map[netip.AddrPort]struct{}, len(buf))
				for _, a := range buf {
					m[a] = struct{}{}
				}
				out[st.svc] = m
			}
		})
		return out
	}()
	ph = newPhase(cfg, -1, fmt.Sprintf("shards=%d: settling", n))
	for {
		res.FinalStateMismatches = ld.mismatches(truth)
		if res.FinalStateMismatches == 0 || time.Since(settleStart) > cfg.Settle {
			break
		}
		ph.describe(fmt.Sprintf("shards=%d: settling, %d streams behind", n, res.FinalStateMismatches))
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		ph.set(time.Since(settleStart).Milliseconds())
	}
	ph.done()
	res.SettleSeconds = time.Since(settleStart).Seconds()
	// Give the last observations a moment: the views match, so the updates are in.
	res.LatencyMissed = ld.missed()

	// Per replica figures.
	cpu1 := 0.0
	repMu.Lock()
	alive := append([]*replica(nil), reps...)
	repMu.Unlock()
	for _, r := range alive {
		if !r.alive() {
			continue
		}
		prof := ""
		if cfg.ProfileDir != "" {
			prof = filepath.Join(cfg.ProfileDir, fmt.Sprintf("shards%d-shard%d.heap.pb.gz", n, r.spec.Index))
		}
		st, err := r.scrape(ctx, prof)
		if err != nil {
			return nil, err
		}
		res.HeapBytesPerShard = append(res.HeapBytesPerShard, st.HeapAlloc)
		res.HeapInuseBytes = append(res.HeapInuseBytes, st.HeapInuse)
		res.RSSBytesPerShard = append(res.RSSBytesPerShard, st.RSS)
		res.CPUSecondsPerShard = append(res.CPUSecondsPerShard, st.CPUSeconds)
		res.Coalescings += st.Coalescings
		res.OwnershipChanges += st.OwnershipChanges
		res.StreamHandovers += st.Handovers
		res.ForwardedStreams += st.Forwarded
		res.OwnedServicesPerShard = append(res.OwnedServicesPerShard, st.OwnedServices)
		cpu1 += st.CPUSeconds
		if w, ok := runqueueWait(r.cmd.Process.Pid); ok {
			res.RunqueueWaitSeconds = append(res.RunqueueWaitSeconds, w)
		}
	}
	res.CPUSecondsChurn = cpu1 - cpu0
	if c, ok := selfCPUSeconds(); ok {
		res.DriverCPUSecondsChurn = c - driverCPU0
	}
	var mst runtime.MemStats
	runtime.ReadMemStats(&mst)
	res.DriverGCCyclesChurn = mst.NumGC - mst0.NumGC
	runtime.GC()
	runtime.ReadMemStats(&mst)
	res.DriverHeapBytes = mst.HeapAlloc
	if w, ok := runqueueWait(0); ok {
		res.DriverRunqueueWaitSeconds = w - driverWait0
	}
	stopStreams()
	ld.wg.Wait()

	res.BytesReceived = ld.bytes.Load()
	res.UpdatesReceived = ld.updates.Load()
	res.StreamsClosed = ld.closed.Load()
	res.StreamsClosedByKill = ld.closedByKill.Load()
	res.ApplyErrors = ld.applyErrors.Load()
	res.Redirects = ld.redirects.Load()
	res.FeedResyncs = srv.Resyncs()
	fillLatency(res, ld)
	if p := ld.firstErr.Load(); p != nil {
		log.Warn("first stream error", zap.Error(*p))
	}
	return res, nil
}

// startCPUProfiles starts, when cfg.ProfileDir is set, CPU profiles of the harness and of
// every replica over the churn phase (shardsN-driver.cpu.pb.gz, shardsN-shardI.cpu.pb.gz).
// stop ends the harness's profile and waits for the replicas' (which last cfg.Duration).
func startCPUProfiles(ctx context.Context, cfg Config, n int, reps []*replica) (stop func() error, _ error) {
	if cfg.ProfileDir == "" {
		return func() error { return nil }, nil
	}
	f, err := os.Create(filepath.Join(cfg.ProfileDir, fmt.Sprintf("shards%d-driver.cpu.pb.gz", n)))
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	var wg sync.WaitGroup
	errs := make([]error, len(reps))
	for i, r := range reps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = r.cpuProfile(ctx, cfg.Duration, filepath.Join(cfg.ProfileDir, fmt.Sprintf("shards%d-shard%d.cpu.pb.gz", n, r.spec.Index)))
		}()
	}
	return func() error {
		pprof.StopCPUProfile()
		err := f.Close()
		wg.Wait()
		return errors.Join(append(errs, err)...)
	}, nil
}

func ms(us int64) float64 { return float64(us) / 1000 }

func fillLatency(res *RunResult, ld *load) {
	h := ld.latency.h
	res.LatencySamples = h.TotalCount()
	if h.TotalCount() > 0 {
		res.P50Ms, res.P99Ms = ms(h.ValueAtQuantile(50)), ms(h.ValueAtQuantile(99))
		res.P999Ms, res.MaxMs = ms(h.ValueAtQuantile(99.9)), ms(h.Max())
		res.LatencyCDF = cdf(h, 200)
	}
	ld.timeline.mu.Lock()
	res.LatencyBySecond = slices.Clone(ld.timeline.secs)
	ld.timeline.mu.Unlock()
	for _, s := range res.LatencyBySecond {
		if s.Slow > 0 {
			res.SlowSeconds++
		}
	}
	s := ld.storm.h
	if s.TotalCount() > 0 {
		res.StormP50Ms, res.StormP99Ms, res.StormMaxMs = ms(s.ValueAtQuantile(50)), ms(s.ValueAtQuantile(99)), ms(s.Max())
	}
}

// stormRun opens cfg.Storm Get and cfg.Storm GetProfile streams at once and records the time
// each takes to its first message. The streams stay open (and are checked) until the end.
func (l *load) stormRun(ctx context.Context, cfg Config, n int, open func(svc, slot int, profile, measure bool) *stream) {
	sts := make([]*stream, 0, 2*cfg.Storm)
	for i := range 2 * cfg.Storm {
		svc := (i / 2 * 7919) % cfg.Cluster.Services // spread over services, unlike the main streams' order
		sts = append(sts, open(svc, i/cfg.StreamsPerConn, i%2 == 1, false))
	}
	for _, st := range sts {
		select {
		case <-st.firstBatch:
			l.storm.record(st.firstAt.Sub(st.opened))
		case <-ctx.Done():
			return
		}
	}
}

// cdf returns h's cumulative distribution in milliseconds: the upper bound of non-empty
// buckets with the fraction at or below it, thinned to points at least 1/n apart in fraction
// or 5% apart in latency (so a log-scale plot keeps its tail), and always the last.
func cdf(h *hdrhistogram.Histogram, n int) []CDFPoint {
	total := h.TotalCount()
	if total == 0 {
		return nil
	}
	var out []CDFPoint
	var cum int64
	bars := h.Distribution()
	for _, b := range bars {
		if b.Count == 0 {
			continue
		}
		cum += b.Count
		p := CDFPoint{Ms: ms(b.To), Fraction: float64(cum) / float64(total)}
		last := cum == total
		if k := len(out); k == 0 || last || p.Fraction-out[k-1].Fraction >= 1/float64(n) || p.Ms >= 1.05*out[k-1].Ms {
			out = append(out, p)
		}
		if last {
			break
		}
	}
	return out
}
