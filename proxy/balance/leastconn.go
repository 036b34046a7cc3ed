package balance

import (
	"net/netip"
	"time"
)

// LeastConn balances opaque TCP connections: each Pick returns the endpoint with the fewest
// open connections relative to its weight. Safe for concurrent use; see the package comment.
type LeastConn[T any] struct {
	set set[T]
}

// NewLeastConn returns an empty balancer. It uses Config.Rand and Config.FailurePenalty;
// now is the origin of its clock.
func NewLeastConn[T any](cfg Config, now time.Time) *LeastConn[T] {
	b := &LeastConn[T]{}
	b.set.init(newParams(cfg, now))
	return b
}

// Reset makes targets the whole endpoint set; endpoints that stay keep their open counts.
func (c *LeastConn[T]) Reset(targets []Target[T], now time.Time) { c.set.reset(targets, now) }

// Add adds targets, or updates the weight and value of addresses already in the set.
func (c *LeastConn[T]) Add(targets []Target[T], now time.Time) { c.set.add(targets, now) }

// Remove drops addrs from the set. Open connections to them are not affected.
func (c *LeastConn[T]) Remove(addrs []netip.AddrPort) { c.set.remove(addrs) }

// Endpoints returns the current set; the slice must not be modified.
func (c *LeastConn[T]) Endpoints() []*Endpoint[T] { return c.set.endpoints() }

// Pick returns the endpoint with the lowest (open+1)/weight among those not failing at now
// (among all of them when every one is failing), ties broken uniformly at random; it
// returns ErrNoEndpoints when the set is empty. It does not count the connection: call
// Acquire. Pick scans the whole set: O(endpoints), once per connection.
func (c *LeastConn[T]) Pick(now time.Time) (*Endpoint[T], error) {
	eps := c.set.endpoints()
	switch len(eps) {
	case 0:
		return nil, ErrNoEndpoints
	case 1:
		return eps[0], nil
	}
	nowNS := c.set.p.stamp(now)
	if e := leastOf(eps, c.set.p.rand.Uint64(), nowNS, true); e != nil {
		return e, nil
	}
	return leastOf(eps, c.set.p.rand.Uint64(), nowNS, false), nil
}

// leastOf returns the least loaded endpoint (skipping failing ones when healthyOnly), or nil
// when every endpoint was skipped. Ties are settled by reservoir sampling: the k-th
// endpoint of equal load replaces the choice with probability 1/k.
func leastOf[T any](eps []*Endpoint[T], r uint64, nowNS int64, healthyOnly bool) *Endpoint[T] {
	var best *Endpoint[T]
	var bestOpen, bestWeight uint64
	ties, state := uint64(0), r
	for _, e := range eps {
		if healthyOnly && e.load.failedUntil.Load() > nowNS {
			continue
		}
		open, w := uint64(max(e.load.active.Load(), 0))+1, uint64(e.load.weight.Load())
		// open/w < bestOpen/bestWeight, without division (both products fit in 64 bits).
		switch lhs, rhs := open*bestWeight, bestOpen*w; {
		case best == nil || lhs < rhs:
			best, bestOpen, bestWeight, ties = e, open, w, 1
		case lhs == rhs:
			ties++
			if (splitmix(&state)>>32)*ties>>32 == 0 {
				best, bestOpen, bestWeight = e, open, w
			}
		}
	}
	return best
}

// splitmix advances a splitmix64 state and returns its next output: cheap random numbers
// for tie-breaking, derived from one draw of Config.Rand.
func splitmix(s *uint64) uint64 {
	*s += 0x9e3779b97f4a7c15
	z := *s
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// Acquire counts a connection to e as open until the returned lease is released. e must
// come from this balancer.
func (c *LeastConn[T]) Acquire(e *Endpoint[T]) Lease {
	e.load.active.Add(1)
	return Lease{l: &e.load}
}

// Lease is one open connection to an endpoint. Release it exactly once, with Release or
// Failed; the zero Lease does nothing. Safe to call from any goroutine.
type Lease struct {
	l *load
}

// Release ends the connection.
func (l Lease) Release() {
	if l.l != nil {
		l.l.active.Add(-1)
	}
}

// Failed ends a connection that could not be established: Pick passes the endpoint over
// until now + Config.FailurePenalty while other endpoints are not failing.
func (l Lease) Failed(now time.Time) {
	if l.l == nil {
		return
	}
	if l.l.p.penaltyNS > 0 {
		l.l.failedUntil.Store(l.l.p.stamp(now) + int64(l.l.p.penaltyNS))
	}
	l.l.active.Add(-1)
}
