package bench

import (
	"net/netip"
	"time"

	"go.uber.org/zap"

	"github.com/meridian-mesh/meridian/bench/gen"
	"github.com/meridian-mesh/meridian/internal/wire"
)

const (
	// convergeEvery is how often, after a kill, every Get stream is compared with the truth:
	// the resolution of RunResult.KillConvergeSeconds. A comparison reads every stream's view
	// (20,000 streams of 100 endpoints at full size), so it is not made more often.
	convergeEvery = 500 * time.Millisecond
	// convergeTolerance is the age below which a difference from the truth is a change in
	// flight, not a stream left behind (the p99 target of propagation is 20 ms).
	convergeTolerance = 500 * time.Millisecond
	// convergeStable is how long the streams must hold the truth, without a lagging stream,
	// for the run to count as converged from the first of those comparisons.
	convergeStable = 2 * time.Second
)

// killWatch measures, from the kill of a replica, how long it takes until every Get stream
// holds the truth again: its result is the time from the kill to the first of the
// comparisons, convergeEvery apart, that found no stream lagging and were followed by
// convergeStable of the same (so it is an upper bound, within convergeEvery).
type killWatch struct {
	at   time.Time     // the kill
	stop chan struct{} // closed to end the watch early
	done chan struct{} // closed when run has returned; then result and converged are set
	// result is the time to converge; when the watch ended first, the time it watched.
	result    time.Duration
	converged bool
}

// watchKill starts measuring the streams' recovery from a kill at at (the goroutine is
// owned by r.bg; finishKillWatch ends it).
func (r *run) watchKill(at time.Time) {
	w := &killWatch{at: at, stop: make(chan struct{}), done: make(chan struct{})}
	r.kill = w
	r.bg.Add(1)
	go func() {
		defer r.bg.Done()
		defer close(w.done)
		w.run(r)
	}()
}

func (w *killWatch) run(r *run) {
	tick := time.NewTicker(convergeEvery)
	defer tick.Stop()
	var goodSince time.Time
	for {
		select {
		case <-w.stop:
			w.result = time.Since(w.at)
			return
		case <-r.ctx.Done():
			w.result = time.Since(w.at)
			return
		case <-tick.C:
		}
		now := time.Now()
		lag := r.ld.lagging(r.truth(), now, convergeTolerance)
		r.log.Debug("streams lagging after the kill", zap.Int("lagging", lag), zap.Duration("since_kill", now.Sub(w.at)))
		if lag > 0 {
			goodSince = time.Time{}
			continue
		}
		if goodSince.IsZero() {
			goodSince = now
		}
		if now.Sub(goodSince) >= convergeStable {
			w.result, w.converged = goodSince.Sub(w.at), true
			return
		}
	}
}

// finishKillWatch, after settling, gives the watch the time to see the streams stay right
// (convergeStable and two comparisons more), then ends it and records its result.
func (r *run) finishKillWatch() {
	w := r.kill
	if w == nil {
		return
	}
	select {
	case <-w.done:
	case <-time.After(convergeStable + 2*convergeEvery):
		close(w.stop)
		<-w.done
	}
	r.res.KillConvergeSeconds = w.result.Seconds()
	r.res.KillUnconverged = !w.converged
}

// recordChanged notes when the endpoints of ch changed, for lagging's tolerance.
func (l *load) recordChanged(ch gen.Change, at time.Time) {
	l.changedAt.Store(ch.Old, at.UnixNano())
	l.changedAt.Store(ch.New, at.UnixNano())
}

// lagging counts the Get streams that differ from truth (service -> addresses) by an
// address that did not change within tolerance of now: streams left behind, as opposed to
// streams a change is on its way to.
func (l *load) lagging(truth map[int]map[netip.AddrPort]struct{}, now time.Time, tolerance time.Duration) int {
	recent := func(ap netip.AddrPort) bool {
		serial, ok := gen.AddrSerial(ap.Addr())
		if !ok {
			return false
		}
		at, ok := l.changedAt.Load(serial)
		return ok && now.Sub(time.Unix(0, at)) < tolerance
	}
	n := 0
	for _, st := range l.all() {
		if st.profile {
			continue
		}
		want := truth[st.svc]
		behind := false
		st.mu.Lock()
		for k := range st.view {
			if _, in := want[k.AddrPort()]; !in && !recent(k.AddrPort()) {
				behind = true
				break
			}
		}
		for ap := range want {
			if behind {
				break
			}
			if _, in := st.view[wire.KeyOf(ap)]; !in && !recent(ap) {
				behind = true
			}
		}
		st.mu.Unlock()
		if behind {
			n++
		}
	}
	return n
}
