package balance

import (
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// set is the endpoint set both balancers share: an immutable slice published by atomic swap
// for the pickers, and an index by address for the writers.
type set[T any] struct {
	p *params

	mu     sync.Mutex // serialises Reset, Add and Remove
	byAddr map[netip.AddrPort]*Endpoint[T]

	cur atomic.Pointer[[]*Endpoint[T]] // never mutated once published
}

func (s *set[T]) init(p *params) {
	s.p, s.byAddr = p, map[netip.AddrPort]*Endpoint[T]{}
	empty := []*Endpoint[T]{}
	s.cur.Store(&empty)
}

// endpoints returns the current set. The slice must not be modified.
func (s *set[T]) endpoints() []*Endpoint[T] { return *s.cur.Load() }

// reset makes targets the whole set, in their order (a repeated address counts once, with
// its last target).
func (s *set[T]) reset(targets []Target[T], now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	nowNS := s.p.stamp(now)
	next := make(map[netip.AddrPort]*Endpoint[T], len(targets))
	list := make([]*Endpoint[T], 0, len(targets))
	for _, t := range targets {
		if e, ok := next[t.Addr]; ok {
			e.update(t)
			continue
		}
		e, ok := s.byAddr[t.Addr]
		if ok {
			e.update(t)
		} else {
			e = newEndpoint(t, s.p, nowNS)
		}
		next[t.Addr] = e
		list = append(list, e)
	}
	for addr, e := range s.byAddr {
		if _, ok := next[addr]; !ok {
			e.load.removed.Store(true)
		}
	}
	s.byAddr = next
	s.cur.Store(&list)
}

// add adds targets to the set, or updates the weight and value of those already in it.
func (s *set[T]) add(targets []Target[T], now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	nowNS := s.p.stamp(now)
	list := slices.Clone(s.endpoints())
	for _, t := range targets {
		if e, ok := s.byAddr[t.Addr]; ok {
			e.update(t)
			continue
		}
		e := newEndpoint(t, s.p, nowNS)
		s.byAddr[t.Addr] = e
		list = append(list, e)
	}
	s.cur.Store(&list)
}

// remove drops addrs from the set; addresses it does not hold are ignored.
func (s *set[T]) remove(addrs []netip.AddrPort) {
	s.mu.Lock()
	defer s.mu.Unlock()
	gone := 0
	for _, a := range addrs {
		if e, ok := s.byAddr[a]; ok {
			e.load.removed.Store(true)
			delete(s.byAddr, a)
			gone++
		}
	}
	if gone == 0 {
		return
	}
	list := make([]*Endpoint[T], 0, len(s.byAddr))
	for _, e := range s.endpoints() {
		if !e.load.removed.Load() {
			list = append(list, e)
		}
	}
	s.cur.Store(&list)
}
