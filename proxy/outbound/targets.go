package outbound

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/meridian-mesh/meridian/internal/run"
	"github.com/meridian-mesh/meridian/proxy/balance"
	"github.com/meridian-mesh/meridian/proxy/discovery"
)

// errStopping refuses work once the outbound side is shutting down.
var errStopping = errors.New("outbound: shutting down")

// errRetired is the cause of the connect error for an endpoint that left its target after a
// request picked it: nothing was sent, so the request moves to another endpoint.
var errRetired = errors.New("the endpoint left its target")

// target is one authority the proxy sends traffic to: either a discovery Target with its
// balancers, or (direct) a name discovery refused. Its fields are set once, before ready is
// closed, except what the watcher updates (the balancers, snap, eps).
type target struct {
	ts        *targets
	authority string
	ready     chan struct{} // closed once resolved
	err       error         // the resolution failed: the target is not cached
	direct    *endpoint     // discovery.ErrNotMeshName: plaintext to the authority

	dt   Target
	p2c  *balance.P2C[*endpoint]
	lc   *balance.LeastConn[*endpoint]
	snap atomic.Pointer[discovery.Snapshot]
	eps  map[netip.AddrPort]*endpoint // the watcher's (and resolve's, before it starts)
	stop chan struct{}                // closed to end the watcher
	done chan struct{}                // closed when the watcher returned

	// refs counts the requests and connections using the target; lastUsed (nanoseconds
	// since the cache's epoch) is when the last of them ended.
	refs     atomic.Int64
	lastUsed atomic.Int64
}

// targets caches targets by authority. acquire and release are the hot path: a read lock,
// a map lookup and an atomic; the janitor (run) takes the write lock to drop targets unused
// for IdleTimeout.
type targets struct {
	o     *Outbound
	epoch time.Time

	mu     sync.RWMutex
	m      map[string]*target
	closed bool

	watchers sync.WaitGroup
}

func newTargets(o *Outbound) *targets {
	return &targets{o: o, epoch: time.Now(), m: map[string]*target{}}
}

func (ts *targets) now() int64 { return int64(time.Since(ts.epoch)) }

// acquire returns the resolved target of authority, resolving it first when it is not
// cached (one resolution per authority; concurrent callers wait for it, each within its
// ctx). The caller calls release once it is done with it. An error is a resolution failure
// (discovery.ErrNotMeshName is not one: that target is direct), ctx's end or errStopping.
func (ts *targets) acquire(ctx context.Context, authority string) (*target, error) {
	ts.mu.RLock()
	t := ts.m[authority]
	if t != nil {
		t.refs.Add(1)
	}
	ts.mu.RUnlock()
	if t == nil {
		var created bool
		if t, created = ts.create(authority); t == nil {
			return nil, errStopping
		}
		if created {
			ts.resolve(t)
		}
	}
	select {
	case <-t.ready:
	default:
		select {
		case <-t.ready:
		case <-ctx.Done():
			t.release()
			return nil, ctx.Err()
		}
	}
	if t.err != nil {
		t.release()
		return nil, t.err
	}
	return t, nil
}

// tryAcquire returns the target of authority with a reference when it is cached and
// resolved (the caller releases it), nil otherwise: it never waits.
func (ts *targets) tryAcquire(authority string) *target {
	ts.mu.RLock()
	t := ts.m[authority]
	if t != nil {
		select {
		case <-t.ready:
			if t.err == nil {
				t.refs.Add(1)
			} else {
				t = nil
			}
		default:
			t = nil
		}
	}
	ts.mu.RUnlock()
	return t
}

// byAddress resolves a name the destination does not know (a short name, an ExternalName, a
// host outside the cluster) by the address DNS gives it, as the transparent path resolves
// the original destination: the address may be a meshed pod's (or a meshed Service's cluster
// IP), reached then over mTLS with its identity, not in plaintext by name. It returns
// discovery.ErrNotMeshName, for a direct target by name (DNS on each dial, as before), when
// the authority is an address already, DNS does not know the name, or nothing at the address
// has an identity.
func (ts *targets) byAddress(ctx context.Context, authority string) (Target, error) {
	host, port, err := net.SplitHostPort(authority)
	if err != nil {
		return nil, discovery.ErrNotMeshName
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return nil, discovery.ErrNotMeshName
	}
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil || len(ips) == 0 {
		return nil, discovery.ErrNotMeshName
	}
	dt, err := ts.o.resolver.Resolve(ctx, net.JoinHostPort(ips[0].Unmap().String(), port))
	if err != nil {
		return nil, err
	}
	if !slices.ContainsFunc(dt.Snapshot().Endpoints, func(e discovery.Endpoint) bool { return e.Identity != "" }) {
		dt.Release()
		return nil, discovery.ErrNotMeshName
	}
	return dt, nil
}

// create returns the cached target of authority with a reference, or a new one that the
// caller must resolve (created); nil once the cache is closed.
func (ts *targets) create(authority string) (t *target, created bool) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.closed {
		return nil, false
	}
	if t = ts.m[authority]; t != nil {
		t.refs.Add(1)
		return t, false
	}
	t = &target{ts: ts, authority: authority, ready: make(chan struct{})}
	t.refs.Store(1)
	ts.m[authority] = t
	return t, true
}

// resolve resolves a new target within ResolveTimeout (or until the hard stop) and closes
// its ready channel. A failure removes it from the cache, so the next request tries again.
func (ts *targets) resolve(t *target) {
	defer close(t.ready)
	o := ts.o
	ctx, cancel := context.WithTimeout(o.ctx, o.cfg.ResolveTimeout)
	dt, err := o.resolver.Resolve(ctx, t.authority)
	if errors.Is(err, discovery.ErrNotMeshName) {
		dt, err = ts.byAddress(ctx, t.authority)
	}
	cancel()
	switch {
	case errors.Is(err, discovery.ErrNotMeshName):
		t.direct = newDirect(o, t.authority)
		return
	case err != nil:
		t.err = fmt.Errorf("resolve %s: %w", t.authority, err)
		ts.mu.Lock()
		if ts.m[t.authority] == t {
			delete(ts.m, t.authority)
		}
		ts.mu.Unlock()
		return
	}
	t.dt, t.stop, t.done = dt, make(chan struct{}), make(chan struct{})
	now := time.Now()
	t.p2c = balance.NewP2C[*endpoint](o.cfg.Balance, now)
	t.lc = balance.NewLeastConn[*endpoint](o.cfg.Balance, now)
	changed := dt.Changed()
	t.apply(dt.Snapshot())
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.closed { // shutting down: no watcher may start after close waited for them
		t.err = errStopping
		t.dt.Release()
		t.retireAll()
		return
	}
	ts.watchers.Add(1)
	go t.watch(changed)
}

// watch applies every new snapshot of the target until stop is closed.
func (t *target) watch(changed <-chan struct{}) {
	defer t.ts.watchers.Done()
	defer close(t.done)
	for {
		select {
		case <-changed:
		case <-t.stop:
			return
		}
		changed = t.dt.Changed()
		t.apply(t.dt.Snapshot())
	}
}

// apply makes s the target's state: its endpoints become both balancers' sets (the profile's
// endpoint when the set is empty and the target is one endpoint). Endpoints that stay keep
// their state; those that went away, or whose identity, transport or labels changed, are
// retired.
func (t *target) apply(s *discovery.Snapshot) {
	if s == nil {
		s = &discovery.Snapshot{}
	}
	eps := s.Endpoints
	if len(eps) == 0 && s.Profile.Endpoint != nil {
		eps = []discovery.Endpoint{*s.Profile.Endpoint}
	}
	next := make(map[netip.AddrPort]*endpoint, len(eps))
	set := make([]balance.Target[*endpoint], 0, len(eps))
	for _, d := range eps {
		if _, dup := next[d.Addr]; dup || !d.Addr.IsValid() {
			continue
		}
		e := t.eps[d.Addr]
		if e == nil || !sameEndpoint(e.disc, d) {
			e = newEndpoint(t.ts.o, t.authority, d)
		}
		next[d.Addr] = e
		set = append(set, balance.Target[*endpoint]{Addr: d.Addr, Weight: d.Weight, Value: e})
	}
	now := time.Now()
	t.p2c.Reset(set, now)
	t.lc.Reset(set, now)
	t.snap.Store(s)
	for addr, e := range t.eps {
		if next[addr] != e {
			e.retire()
		}
	}
	t.eps = next
}

// opaque reports whether the target's profile says its port is opaque, or the target is one
// endpoint hinted opaque.
func (t *target) opaque() bool {
	s := t.snap.Load()
	if s == nil {
		return false
	}
	return s.Profile.Opaque || (s.Profile.Endpoint != nil && s.Profile.Endpoint.Hint == discovery.HintOpaque)
}

// release returns a reference taken by acquire.
func (t *target) release() {
	t.lastUsed.Store(t.ts.now())
	t.refs.Add(-1)
}

// close ends a target no one uses any more: its watcher, its discovery Target and its
// connection pools.
func (t *target) close() {
	if t.direct != nil {
		t.direct.retire()
		return
	}
	if t.dt == nil {
		return
	}
	close(t.stop)
	<-t.done // bounded: an apply builds endpoints, it does not block
	t.dt.Release()
	t.retireAll()
}

func (t *target) retireAll() {
	for _, e := range t.eps {
		e.retire()
	}
}

// run drops targets unused for IdleTimeout until ctx ends.
func (ts *targets) run(ctx context.Context) {
	run.Every(ctx, min(max(ts.o.cfg.IdleTimeout/4, 10*time.Millisecond), time.Second), ts.sweep)
}

// sweep drops the targets that are resolved, unused and idle for IdleTimeout.
func (ts *targets) sweep() {
	idle := int64(ts.o.cfg.IdleTimeout)
	now := ts.now()
	var gone, live []*target
	ts.mu.Lock()
	for a, t := range ts.m {
		select {
		case <-t.ready:
		default:
			continue // still resolving
		}
		if t.refs.Load() == 0 && now-t.lastUsed.Load() >= idle {
			delete(ts.m, a)
			gone = append(gone, t)
		} else if t.err == nil {
			live = append(live, t)
		}
	}
	ts.mu.Unlock()
	for _, t := range gone {
		t.close()
	}
	for _, t := range live {
		t.sweepPools(now)
	}
}

// sweepPools closes the lean connections idle for PoolIdleTimeout.
func (t *target) sweepPools(now int64) {
	idle := int64(t.ts.o.cfg.PoolIdleTimeout)
	before := time.Now().Add(-t.ts.o.cfg.PoolIdleTimeout)
	if t.direct != nil {
		t.direct.lean.Sweep(now, idle)
		t.direct.leanH2.CloseIdle(before, false)
		return
	}
	for _, e := range t.p2c.Endpoints() {
		e.Value().lean.Sweep(now, idle)
		e.Value().leanH2.CloseIdle(before, false)
	}
}

// close drops every target and waits for their watchers; acquire fails after it. Called
// once no request or connection uses a target any more.
func (ts *targets) close() {
	ts.mu.Lock()
	ts.closed = true
	all := ts.m
	ts.m = map[string]*target{}
	ts.mu.Unlock()
	for _, t := range all {
		select {
		case <-t.ready:
			t.close()
		default: // a resolution still running has no request waiting for it any more
		}
	}
	ts.watchers.Wait()
}
