package balance

import (
	"math"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
)

// Target is one address a balancer should hold, as discovery reports it.
type Target[T any] struct {
	Addr netip.AddrPort
	// Weight is the destination's WeightedAddr.weight; 0 means DefaultWeight.
	Weight uint32
	// Value is the caller's data for the endpoint (TLS identity, protocol hint, connection
	// pool, ...), returned by Endpoint.Value. The balancer never looks at it.
	Value T
}

// Endpoint is one address in a balancer's set, with its load state. A balancer returns the
// same *Endpoint for an address for as long as the address stays in its set. All methods
// are safe for concurrent use.
type Endpoint[T any] struct {
	addr  netip.AddrPort
	value atomic.Pointer[T]
	load  load
}

// Addr returns the endpoint's address.
func (e *Endpoint[T]) Addr() netip.AddrPort { return e.addr }

// Value returns the Target.Value of the latest update that named this address.
func (e *Endpoint[T]) Value() T { return *e.value.Load() }

// Weight returns the endpoint's weight (DefaultWeight when discovery sent none).
func (e *Endpoint[T]) Weight() uint32 { return e.load.weight.Load() }

// Active returns the requests started and not yet done (P2C), or the open connections
// (LeastConn).
func (e *Endpoint[T]) Active() int64 { return e.load.active.Load() }

// Removed reports whether the endpoint has left its balancer's set; a caller holding
// resources for it (idle connections) can release them.
func (e *Endpoint[T]) Removed() bool { return e.load.removed.Load() }

func newEndpoint[T any](t Target[T], p *params, nowNS int64) *Endpoint[T] {
	e := &Endpoint[T]{addr: t.Addr}
	e.load.p = p
	e.load.rtt.Store(math.Float64bits(p.seedNS))
	e.load.at.Store(nowNS)
	e.load.failedUntil.Store(math.MinInt64)
	e.update(t)
	return e
}

// update applies a new weight and value; the load state stays.
func (e *Endpoint[T]) update(t Target[T]) {
	w := t.Weight
	if w == 0 {
		w = DefaultWeight
	}
	e.load.weight.Store(w)
	v := t.Value
	e.value.Store(&v)
}

// load is an endpoint's state. The estimate and its time form one value that readers must
// see consistently; it is a seqlock: a writer (holding mu) makes seq odd, stores rtt and at,
// then makes seq even again, and a reader retries while seq is odd or changed under it. All
// fields are atomics, so readers never block writers and the race detector sees no race.
type load struct {
	p       *params
	weight  atomic.Uint32
	active  atomic.Int64
	removed atomic.Bool
	// failedUntil is the stamp until which LeastConn passes the endpoint over.
	failedUntil atomic.Int64

	mu  sync.Mutex    // serialises writers of seq, rtt and at
	seq atomic.Uint64 // odd while a write is in progress
	rtt atomic.Uint64 // the estimate, float64 nanoseconds
	at  atomic.Int64  // the estimate's time, nanoseconds since the epoch
}

// estimate returns the stored estimate and its time, consistently.
func (l *load) estimate() (float64, int64) {
	for spins := 0; ; spins++ {
		s := l.seq.Load()
		if s&1 == 0 {
			rtt, at := l.rtt.Load(), l.at.Load()
			if l.seq.Load() == s {
				return math.Float64frombits(rtt), at
			}
		}
		if spins > 8 { // the writer was descheduled mid-write; let it finish
			runtime.Gosched()
		}
	}
}

// projected returns the estimate decayed to nowNS, without changing it.
func (l *load) projected(nowNS int64) float64 {
	rtt, at := l.estimate()
	return decayed(rtt, at, nowNS, l.p.decayNS)
}

func decayed(rtt float64, at, nowNS int64, decayNS float64) float64 {
	if nowNS <= at {
		return rtt
	}
	return rtt * math.Exp(-float64(nowNS-at)/decayNS)
}

// cost is the P2C load: projected estimate * (pending+1) / weight.
func (l *load) cost(nowNS int64) float64 {
	return l.projected(nowNS) * float64(l.active.Load()+1) / float64(l.weight.Load())
}

// observe records one round-trip sample at nowNS (failed applies the penalty).
func (l *load) observe(nowNS int64, sampleNS float64, failed bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	rtt, at := math.Float64frombits(l.rtt.Load()), l.at.Load()
	w := 1.0 // how much of the old estimate is left at nowNS
	if nowNS > at {
		w = math.Exp(-float64(nowNS-at) / l.p.decayNS)
	}
	proj := rtt * w
	if failed && l.p.penaltyNS > 0 {
		sampleNS = max(sampleNS, l.p.penaltyNS, proj)
	}
	var next float64
	switch {
	case sampleNS > proj: // peak: the estimate jumps to the sample
		next = sampleNS
	case nowNS > at: // move toward the sample by how long it has been since the last one
		next = proj + sampleNS*(1-w)
	default: // not newer than the estimate: nothing to blend
		return
	}
	l.seq.Add(1)
	l.rtt.Store(math.Float64bits(next))
	l.at.Store(max(at, nowNS))
	l.seq.Add(1)
}
