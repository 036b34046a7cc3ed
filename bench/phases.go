package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"sync"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/meridian-mesh/meridian/bench/gen"
)

// startReplicas starts the run's n replicas together, as a StatefulSet whose pods start in
// parallel does: replica 0 first, until its admin port answers (the others join its gossip
// address), then the others at once. With the ring, each waits for all n to be members
// before it loads its share (--ring-expect-replicas), rather than the first loading the
// whole cluster. It adds them to the fleet in order, each once ready.
func (r *run) startReplicas() error {
	start := time.Now()
	ph := newPhase(r.cfg, int64(r.n), fmt.Sprintf("shards=%d: starting replicas", r.n), "replicas")
	reps := make([]*replica, r.n)
	errs := make([]error, r.n)
	live := func(rep *replica) error { return rep.waitLive(r.ctx, r.cfg.ReadyTimeout) }
	reps[0], errs[0] = r.launch(0, live)
	if errs[0] != nil {
		return errs[0]
	}
	var wg sync.WaitGroup
	for i := 1; i < r.n; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); reps[i], errs[i] = r.launch(i, live) }()
	}
	wg.Wait()
	err := errors.Join(errs...)
	for i, rep := range reps {
		if err == nil {
			if err = rep.waitReady(r.ctx, r.cfg.ReadyTimeout); err == nil {
				if err = r.reps.add(rep); err == nil {
					ph.set(int64(i + 1))
				}
				continue // add kills rep when it fails
			}
		}
		if rep != nil {
			rep.Kill()
		}
	}
	if err != nil {
		return err
	}
	ph.done()
	r.res.SyncSeconds = time.Since(start).Seconds()
	return nil
}

// openStreams dials the connections, opens cfg.Streams Get streams over them and waits for
// each one's first batch.
func (r *run) openStreams() error {
	cfg := r.cfg
	if err := r.dial(); err != nil {
		return err
	}
	for s := range cfg.Streams {
		svc := s % cfg.Cluster.Services
		r.ld.subsPerSvc[svc]++
		r.open(svc, s/cfg.StreamsPerConn, false, true)
	}
	r.res.StreamsOpened = cfg.Streams
	ph := newPhase(cfg, int64(cfg.Streams), fmt.Sprintf("shards=%d: opening streams", r.n), "streams")
	deadline := time.After(cfg.ReadyTimeout)
	for i, st := range r.ld.all() {
		select {
		case <-st.firstBatch:
		case <-deadline:
			return fmt.Errorf("stream %d (%s) had no first batch within %s", i, r.ld.paths[st.svc], cfg.ReadyTimeout)
		case <-r.ctx.Done():
			return r.ctx.Err()
		}
		if i%1000 == 0 {
			ph.set(int64(i))
		}
	}
	ph.set(int64(cfg.Streams))
	ph.done()
	return nil
}

// dial opens the run's connections (cfg.StreamsPerConn streams each, at least one per
// replica), spread round-robin over the replicas.
func (r *run) dial() error {
	nconns := (r.cfg.Streams + r.cfg.StreamsPerConn - 1) / r.cfg.StreamsPerConn
	for i := range r.n {
		// Connections c with c % n == i, of max(nconns, n).
		if err := r.dialReplica(i, r.reps.get(i).spec.Addr, (max(nconns, r.n)-i+r.n-1)/r.n); err != nil {
			return err
		}
		r.ld.ready[i].Store(true) // the replicas started before churn are ready
	}
	return nil
}

// dialReplica dials n connections to replica i at addr, on which streams are then opened and
// to which redirects are followed (grpc.NewClient connects when first used).
func (r *run) dialReplica(i int, addr string, n int) error {
	conns := make([]*grpc.ClientConn, 0, n)
	for range n {
		cc, err := grpc.NewClient(addr,
			grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(256<<20)))
		if err != nil {
			return err
		}
		conns = append(conns, cc)
	}
	for _, c := range r.ld.setReplica(i, addr, conns) {
		c.Close()
	}
	return nil
}

// churn applies cfg.Churn changes a second for cfg.Duration, with the storm, join and kill
// on the way, and the CPU profiles over it when asked.
func (r *run) churn() error {
	stopProfiles, err := startCPUProfiles(r.ctx, r.cfg, r.n, r.reps.list())
	if err != nil {
		return err
	}
	ph := newPhase(r.cfg, max(r.cfg.Duration.Milliseconds(), 1), fmt.Sprintf("shards=%d: churn %g/s", r.n, r.cfg.Churn), "ms")
	churnErr, err := r.churnLoop(ph)
	// The changes still on their way to the API server are sent before settling.
	if ferr := r.world.flush(); churnErr == nil {
		churnErr = ferr
	}
	if err != nil {
		_ = stopProfiles() // the run was cancelled: so were the replicas' profiles
		return err
	}
	ph.set(r.cfg.Duration.Milliseconds())
	ph.done()
	if err := stopProfiles(); err != nil {
		r.log.Warn("CPU profiles", zap.Error(err))
	}
	if churnErr != nil {
		return fmt.Errorf("churn: %w", churnErr)
	}
	return nil
}

// churnLoop ticks every 10ms until cfg.Duration has passed or a change fails (churnErr),
// firing the events that are due and applying the changes that are due. err is r.ctx's.
func (r *run) churnLoop(ph *phase) (churnErr, err error) {
	cfg := r.cfg
	stormAt := cfg.StormAt
	if stormAt == 0 {
		stormAt = cfg.Duration / 2
	}
	rng := rand.New(rand.NewPCG(cfg.Cluster.Seed, uint64(r.n)))
	start := time.Now()
	r.ld.timeline.mu.Lock()
	r.ld.timeline.start = start
	r.ld.timeline.mu.Unlock()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	ev := events{storm: cfg.Storm == 0, join: cfg.JoinAt == 0, kill: cfg.KillAt == 0}
	for {
		el := time.Since(start)
		r.fire(&ev, el, stormAt, ph)
		if el >= cfg.Duration || churnErr != nil {
			return churnErr, nil
		}
		churnErr = r.applyDue(rng, el)
		ph.set(el.Milliseconds())
		select {
		case <-r.ctx.Done():
			return nil, r.ctx.Err()
		case <-tick.C:
		}
	}
}

// events are the one-off events of the churn phase, each true once it has happened (or
// when it was not asked for).
type events struct{ storm, join, kill bool }

// fire starts the events that are due el into churn: the storm (owned by r.storm), a
// joining replica (owned by r.bg), the kill of the last replica.
func (r *run) fire(ev *events, el, stormAt time.Duration, ph *phase) {
	cfg := r.cfg
	if !ev.storm && el >= stormAt {
		ev.storm = true
		ph.describe(fmt.Sprintf("shards=%d: storm of %d", r.n, cfg.Storm))
		r.storm.Add(1)
		go func() { defer r.storm.Done(); r.stormWithCPU() }()
		r.res.StormStreams = 2 * cfg.Storm
	}
	if !ev.join && el >= cfg.JoinAt {
		ev.join = true
		r.joined = make(chan struct{})
		r.bg.Add(1)
		go func() {
			defer r.bg.Done()
			defer close(r.joined)
			// Redirects to it are followed (a proxy follows them to any replica) from when
			// it starts, since it joins the ring before it is ready; streams moved off a
			// killed replica open there once it is ready.
			r.joinErr = r.startReady(r.n, func(addr string) error { return r.dialReplica(r.n, addr, 1) })
			if r.joinErr == nil {
				r.ld.ready[r.n].Store(true)
			}
		}()
	}
	if !ev.kill && el >= cfg.KillAt {
		ev.kill, r.res.Killed = true, true
		victim := r.n - 1
		rep := r.reps.get(victim) // a joining replica may be added meanwhile
		r.readKilledCPU(rep)
		r.ld.dead[victim].Store(true)
		at := time.Now()
		rep.Kill()
		r.log.Info("killed a replica", zap.Int("replica", victim), zap.Time("at", at))
		r.watchKill(at)
	}
}

// applyDue applies the changes due el into churn, at most 10,000 at a time.
func (r *run) applyDue(rng *rand.Rand, el time.Duration) error {
	due := int64(el.Seconds() * r.cfg.Churn)
	for k := 0; r.res.ChangesApplied < due && k < 10000; k++ {
		if err := r.world.apply(r.ctx, rng, r.ld.busy, r.ld.recordChange, r.ld.changeReturned); err != nil {
			return err
		}
		r.res.ChangesApplied++
	}
	return nil
}

// stormRun opens cfg.Storm Get and cfg.Storm GetProfile streams at once and records the time
// each takes to its first message, or counts it unanswered when it has none by the end of the
// run (ctx). The streams stay open (and are checked) until the end. It reports whether every
// stream answered, returning once the last did.
func (l *load) stormRun(ctx context.Context, cfg Config, n int, open func(svc, slot int, profile, measure bool) *stream) (all bool) {
	sts := make([]*stream, 0, 2*cfg.Storm)
	for i := range 2 * cfg.Storm {
		svc := (i / 2 * 7919) % cfg.Cluster.Services // spread over services, unlike the main streams' order
		sts = append(sts, open(svc, i/cfg.StreamsPerConn, i%2 == 1, false))
	}
	for i, st := range sts {
		select {
		case <-st.firstBatch:
			l.recordStorm(st)
		case <-ctx.Done():
			// The run is over: the streams that answered meanwhile count, in any order, and
			// those that never did are counted as such.
			for _, st := range sts[i:] {
				select {
				case <-st.firstBatch:
					l.recordStorm(st)
				default:
					l.stormUnanswered.Add(1)
				}
			}
			return false
		}
	}
	return true
}

// recordStorm records the time storm stream st took to its first message.
func (l *load) recordStorm(st *stream) {
	d := st.firstAt.Sub(st.opened)
	l.storm.record(d)
	if !st.profile {
		l.stormGets.record(d)
	}
}

// awaitJoin waits for the replica that joined during churn, if one did, to be ready: a run
// whose ring figures leave out a replica that never joined is no run of the ring asked for.
func (r *run) awaitJoin() error {
	if r.joined == nil {
		return nil
	}
	select {
	case <-r.joined:
	case <-r.ctx.Done():
		return r.ctx.Err()
	}
	if r.joinErr != nil {
		return fmt.Errorf("the replica joining at %s: %w", r.cfg.JoinAt, r.joinErr)
	}
	r.res.Joined = true
	return nil
}

// settle waits, at most cfg.Settle, for every Get stream to hold the truth, and counts
// those that do not.
func (r *run) settle() error {
	start := time.Now()
	truth := r.truth()
	ph := newPhase(r.cfg, -1, fmt.Sprintf("shards=%d: settling", r.n), "")
	for {
		r.res.FinalStateMismatches = r.ld.mismatches(truth)
		if r.res.FinalStateMismatches == 0 || time.Since(start) > r.cfg.Settle {
			break
		}
		ph.describe(fmt.Sprintf("shards=%d: settling, %d streams behind", r.n, r.res.FinalStateMismatches))
		select {
		case <-r.ctx.Done():
			return r.ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		ph.set(time.Since(start).Milliseconds())
	}
	ph.done()
	r.res.SettleSeconds = time.Since(start).Seconds()
	// Give the last observations a moment: the views match, so the updates are in.
	r.res.LatencyMissed = r.ld.missed()
	r.finishKillWatch()
	return nil
}

// truth returns, for each service with a Get stream, its ready addresses now.
func (r *run) truth() map[int]map[netip.AddrPort]struct{} {
	out := map[int]map[netip.AddrPort]struct{}{}
	var buf []netip.AddrPort
	r.world.read(func(c *gen.Cluster) {
		for _, st := range r.ld.all() {
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
}
