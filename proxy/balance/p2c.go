package balance

import (
	"net/netip"
	"time"
)

// P2C balances requests over a set of endpoints by power of two choices over peak-EWMA
// cost. Safe for concurrent use; see the package comment for the contract.
type P2C[T any] struct {
	set set[T]
}

// NewP2C returns an empty balancer; now is the origin of its clock (any time before the
// first call that passes a now).
func NewP2C[T any](cfg Config, now time.Time) *P2C[T] {
	b := &P2C[T]{}
	b.set.init(newParams(cfg, now))
	return b
}

// Reset makes targets the whole endpoint set (the first Add after a discovery stream
// (re)connects). Endpoints that stay keep their load; new ones start at the default RTT.
func (p *P2C[T]) Reset(targets []Target[T], now time.Time) { p.set.reset(targets, now) }

// Add adds targets, or updates the weight and value of addresses already in the set.
func (p *P2C[T]) Add(targets []Target[T], now time.Time) { p.set.add(targets, now) }

// Remove drops addrs from the set. Requests in flight on them finish normally.
func (p *P2C[T]) Remove(addrs []netip.AddrPort) { p.set.remove(addrs) }

// Endpoints returns the current set, in the order it was built. The slice must not be
// modified; it does not change when the set is updated later.
func (p *P2C[T]) Endpoints() []*Endpoint[T] { return p.set.endpoints() }

// Pick returns the endpoint for the next request: of two distinct endpoints drawn at
// random, the one with the lower cost at now; the only endpoint when there is one; and
// ErrNoEndpoints when there are none. It does not count the request: call Start.
func (p *P2C[T]) Pick(now time.Time) (*Endpoint[T], error) {
	eps := p.set.endpoints()
	switch len(eps) {
	case 0:
		return nil, ErrNoEndpoints
	case 1:
		return eps[0], nil
	}
	a, b := pair(p.set.p.rand.Uint64(), len(eps))
	nowNS := p.set.p.stamp(now)
	if eps[a].load.cost(nowNS) <= eps[b].load.cost(nowNS) {
		return eps[a], nil
	}
	return eps[b], nil
}

// Start counts a request on e as pending (raising its cost) until the returned handle's
// Done. e must come from this balancer.
func (p *P2C[T]) Start(e *Endpoint[T]) Handle {
	e.load.active.Add(1)
	return Handle{l: &e.load}
}

// Handle is one pending request on an endpoint. Call Done exactly once; the zero Handle's
// Done does nothing. Safe to call from any goroutine.
type Handle struct {
	l *load
}

// Done ends the request: it records rtt (the time to the first response byte, as linkerd
// measures it) at now, and a failed request at least at Config.FailurePenalty, and stops
// counting the request as pending.
func (h Handle) Done(now time.Time, rtt time.Duration, failed bool) {
	if h.l == nil {
		return
	}
	h.l.observe(h.l.p.stamp(now), float64(max(rtt, 0)), failed)
	h.l.active.Add(-1)
}
