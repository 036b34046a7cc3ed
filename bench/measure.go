package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/meridian-mesh/meridian/bench/gen"
	"go.uber.org/zap"
)

// usage is what the run's CPU and GC figures are counted from: their values at the start of
// churn.
type usage struct {
	replicaCPU []float64 // per replica started before churn: its CPU seconds
	// killedCPU is the killed replica's CPU seconds spent in churn, read just before the kill
	// (0 without one, or when that read failed: see readKilledCPU).
	killedCPU  float64
	driverWait float64 // the harness's run-queue wait
	driverCPU  float64
	driverGC   uint32
}

// readBaseline reads r.baseline, and marks the churn's start for the world's own figures.
func (r *run) readBaseline() error {
	r.world.beginChurn(time.Now())
	r.baseline.driverWait, _ = runqueueWait(0)
	r.baseline.driverCPU, _ = selfCPUSeconds()
	var mst runtime.MemStats
	runtime.ReadMemStats(&mst)
	r.baseline.driverGC = mst.NumGC
	for _, rep := range r.reps.list() {
		st, err := rep.scrape(r.ctx, "")
		if err != nil {
			return err
		}
		r.baseline.replicaCPU = append(r.baseline.replicaCPU, st.CPUSeconds)
	}
	return nil
}

// replicaCPUSince returns the CPU seconds replica rep spent since the start of churn, given
// its total now: a replica that joined during churn spent all of its own in it.
func (r *run) replicaCPUSince(rep *replica, total float64) float64 {
	if i := rep.spec.Index; i < len(r.baseline.replicaCPU) {
		return total - r.baseline.replicaCPU[i]
	}
	return total
}

// readKilledCPU reads, just before rep is killed, the CPU seconds it spent in churn: after
// the kill there is no replica to ask. A failed read leaves them out, with a warning.
func (r *run) readKilledCPU(rep *replica) {
	m, err := rep.metrics(r.ctx)
	if err != nil {
		r.log.Warn("the CPU figures leave out the killed replica's churn", zap.Error(err))
		return
	}
	r.baseline.killedCPU = r.replicaCPUSince(rep, m["process_cpu_seconds_total"])
}

// measure reads, from every replica still alive, its heap, RSS, CPU and sharding figures
// (after a forced collection; with cfg.ProfileDir, saving its heap profile), then the
// harness's own.
func (r *run) measure() error {
	res := r.res
	cpu := 0.0
	for _, rep := range r.reps.list() {
		if !rep.Alive() {
			continue
		}
		prof := ""
		if r.cfg.ProfileDir != "" {
			prof = filepath.Join(r.cfg.ProfileDir, fmt.Sprintf("shards%d-shard%d.heap.pb.gz", r.n, rep.spec.Index))
		}
		st, err := rep.scrape(r.ctx, prof)
		if err != nil {
			return err
		}
		res.addReplica(st)
		cpu += r.replicaCPUSince(rep, st.CPUSeconds)
		if w, ok := runqueueWait(rep.Pid()); ok {
			res.RunqueueWaitSeconds = append(res.RunqueueWaitSeconds, w)
		}
	}
	res.CPUSecondsChurn = cpu + r.baseline.killedCPU
	r.world.measure(res)
	r.measureDriver()
	return nil
}

// measureIdle reads every replica's live heap (after a forced collection; with
// cfg.ProfileDir, saving its heap profile as shards<n>-shard<i>.idle-heap.pb.gz) once it is ready,
// the ring's shares are settled (waitReleased), and before any stream is open.
func (r *run) measureIdle() error {
	if err := r.waitReleased(); err != nil {
		return err
	}
	for _, rep := range r.reps.list() {
		prof := ""
		if r.cfg.ProfileDir != "" {
			prof = filepath.Join(r.cfg.ProfileDir, fmt.Sprintf("shards%d-shard%d.idle-heap.pb.gz", r.n, rep.spec.Index))
		}
		st, err := rep.scrape(r.ctx, prof)
		if err != nil {
			return err
		}
		r.res.IdleHeapBytesPerShard = append(r.res.IdleHeapBytesPerShard, st.HeapLive)
		r.res.IdleHeapAllocBytes = append(r.res.IdleHeapAllocBytes, st.HeapAlloc)
	}
	return nil
}

// releaseSettle bounds waitReleased.
const releaseSettle = time.Minute

// waitReleased waits, at most releaseSettle, until the replicas hold the cluster's services
// once between them and their counts have held still for a second. After the ring's joins
// each replica loads the share it gained before it drops what it lost, so an idle heap read
// in between counts both. (At most services+1 are held: the API server adds the default
// Service.) It gives up with a warning rather than fail the run.
func (r *run) waitReleased() error {
	reps := r.reps.list()
	if len(reps) < 2 {
		return nil
	}
	deadline := time.Now().Add(releaseSettle)
	var last []float64
	for still := 0; still < 2; {
		held, total := make([]float64, len(reps)), 0.0
		for i, rep := range reps {
			m, err := rep.metrics(r.ctx)
			if err != nil {
				return err
			}
			held[i] = m["destination_owned_services"]
			total += held[i]
		}
		if total <= float64(r.cfg.Cluster.Services+1) && slices.Equal(held, last) {
			still++
		} else {
			still = 0
		}
		last = held
		if time.Now().After(deadline) {
			r.log.Warn("replicas still hold overlapping shares; idle heap measured anyway", zap.Float64s("held services", held))
			return nil
		}
		select {
		case <-r.ctx.Done():
			return r.ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
	return nil
}

// addReplica adds one replica's figures to res.
func (res *RunResult) addReplica(st procStats) {
	res.HeapBytesPerShard = append(res.HeapBytesPerShard, st.HeapLive)
	res.HeapAllocBytes = append(res.HeapAllocBytes, st.HeapAlloc)
	res.HeapInuseBytes = append(res.HeapInuseBytes, st.HeapInuse)
	res.RSSBytesPerShard = append(res.RSSBytesPerShard, st.RSS)
	res.CPUSecondsPerShard = append(res.CPUSecondsPerShard, st.CPUSeconds)
	res.Coalescings += st.Coalescings
	res.OwnershipChanges += st.OwnershipChanges
	res.Suspicions += st.Suspected
	res.MembersDeclaredFailed += st.DeclaredFailed
	res.SlowSchedWaits += st.SlowSchedWaits
	res.DeadHeld += st.HeldDead
	res.DeadRevived += st.Revived
	res.PodGets += st.PodGets
	res.PodRecent += st.PodRecent
	res.StreamHandovers += st.Handovers
	res.ForwardedStreams += st.Forwarded
	res.OwnedServicesPerShard = append(res.OwnedServicesPerShard, st.OwnedServices)
}

// measureDriver reads the harness's CPU time, GC cycles and run-queue wait since the
// baseline, and its live heap after a collection.
func (r *run) measureDriver() {
	res := r.res
	if c, ok := selfCPUSeconds(); ok {
		res.DriverCPUSecondsChurn = c - r.baseline.driverCPU
	}
	var mst runtime.MemStats
	runtime.ReadMemStats(&mst)
	res.DriverGCCyclesChurn = mst.NumGC - r.baseline.driverGC
	runtime.GC()
	runtime.ReadMemStats(&mst)
	res.DriverHeapBytes = mst.HeapAlloc
	if w, ok := runqueueWait(0); ok {
		res.DriverRunqueueWaitSeconds = w - r.baseline.driverWait
	}
}

// collect stops the streams and gathers what they and the feed counted.
func (r *run) collect() {
	r.stopStreams()
	res, ld := r.res, r.ld
	res.BytesReceived = ld.bytes.Load()
	res.UpdatesReceived = ld.updates.Load()
	res.StreamsClosed = ld.closed.Load()
	res.StreamsClosedByKill = ld.closedByKill.Load()
	res.ApplyErrors = ld.applyErrors.Load()
	res.Redirects = ld.redirects.Load()
	res.StormUnanswered = ld.stormUnanswered.Load()
	res.FeedResyncs = r.world.resyncs()
	for k := range ld.kinds {
		if n := ld.kinds[k].Load(); n > 0 {
			if res.ChangesByKind == nil {
				res.ChangesByKind = map[string]int64{}
			}
			res.ChangesByKind[gen.Kind(k).String()] = n
		}
	}
	fillLatency(res, ld)
	r.stormUse.fill(res)
	if p := ld.firstErr.Load(); p != nil {
		r.log.Warn("first stream error", zap.Error(*p))
	}
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
	res.SlowSeconds = ld.timeline.slowSeconds()
	s := ld.storm.h
	if s.TotalCount() > 0 {
		res.StormP50Ms, res.StormP99Ms, res.StormMaxMs = ms(s.ValueAtQuantile(50)), ms(s.ValueAtQuantile(99)), ms(s.Max())
	}
	if g := ld.stormGets.h; g.TotalCount() > 0 {
		res.StormGetP99Ms = ms(g.ValueAtQuantile(99))
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
