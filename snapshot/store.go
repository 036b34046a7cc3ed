package snapshot

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/puzpuzpuz/xsync/v3"
)

// Key names one service port, as one kind of client sees it.
type Key struct {
	Namespace, Name string
	Port            uint32
	// View names the client view of the port ("" for the view of a client that says nothing
	// about its locality): streams whose clients see the same endpoints share one key, and so
	// one snapshot and one delta per publication. Its meaning is the writer's.
	View string
}

func (k Key) String() string {
	if k.View != "" {
		return fmt.Sprintf("%s/%s:%d (view %q)", k.Namespace, k.Name, k.Port, k.View)
	}
	return fmt.Sprintf("%s/%s:%d", k.Namespace, k.Name, k.Port)
}

// Snapshot is one published version of a service port's address set. It is immutable: the
// store never changes a Snapshot after Publish returns it, and neither may anyone else.
type Snapshot struct {
	Key     Key
	Version uint64
	Set     *AddressSet
}

// DefaultQueueCapacity is the default bound of a subscription's delta queue.
const DefaultQueueCapacity = 128

// StoreConfig configures a Store.
type StoreConfig struct {
	// OnOverflow, when set, is called (without locks held by the store on the subscriber)
	// each time a subscription's queue is full and its deltas are coalesced.
	OnOverflow func(Key)
}

// Store holds the current Snapshot of every service port and the subscriptions to them.
// All methods are safe for concurrent use. Publish calls for one key are serialised by the
// store; Load never blocks.
type Store struct {
	cfg     StoreConfig
	entries *xsync.MapOf[Key, *entry]
}

type entry struct {
	cur atomic.Pointer[Snapshot]
	// mu serialises publication to this key and changes to subs.
	mu   sync.Mutex
	subs map[*Subscription]struct{}
}

// NewStore returns an empty store.
func NewStore(cfg StoreConfig) *Store {
	return &Store{cfg: cfg, entries: xsync.NewMapOf[Key, *entry]()}
}

// Load returns the current snapshot of k, or nil when nothing was published for it. It takes no
// lock and allocates nothing.
func (s *Store) Load(k Key) *Snapshot {
	e, ok := s.entries.Load(k)
	if !ok {
		return nil
	}
	return e.cur.Load()
}

// Len returns the number of keys held.
func (s *Store) Len() int { return s.entries.Size() }

// Keys calls f for each key held until f returns false.
func (s *Store) Keys(f func(Key) bool) {
	s.entries.Range(func(k Key, _ *entry) bool { return f(k) })
}

func (s *Store) entry(k Key) *entry {
	e, _ := s.entries.LoadOrCompute(k, func() *entry {
		return &entry{subs: make(map[*Subscription]struct{})}
	})
	return e
}

// Publish makes set the current state of k, if it differs from the current one, and queues the
// delta to every subscription of k. set must not be altered afterwards. It returns the current
// snapshot and whether a new one was published.
func (s *Store) Publish(k Key, set *AddressSet) (*Snapshot, bool) {
	return s.PublishShared(k, set, nil)
}

// DiffCache lets the publications of one set to several keys (the views of one zone) share
// their work: whether the set differs from the one it replaces, and the delta between them,
// are computed once for each pair of sets and reused while the keys replace the same set by
// the same set. A DiffCache is for one goroutine's consecutive PublishShared calls; its zero
// value is ready.
type DiffCache struct {
	from, to *AddressSet
	equal    bool
	delta    *Delta // nil until a subscription needs it
}

// PublishShared is Publish, sharing work through c with the publications before it (c may be
// nil).
func (s *Store) PublishShared(k Key, set *AddressSet, c *DiffCache) (*Snapshot, bool) {
	e := s.entry(k)
	e.mu.Lock()
	old := e.cur.Load()
	var oldSet *AddressSet
	var version uint64
	if old != nil {
		if c.same(old.Set, set) {
			e.mu.Unlock()
			return old, false
		}
		oldSet, version = old.Set, old.Version
	}
	next := &Snapshot{Key: k, Version: version + 1, Set: set}
	e.cur.Store(next)
	var shared *Delta // computed once, for every subscriber that was at old
	if d := c.diff(oldSet, set); d != nil {
		dd := *d
		dd.Version = next.Version
		shared = &dd
	}
	var overflowed int
	for sub := range e.subs {
		if sub.offer(old, next, oldSet, &shared) {
			overflowed++
		}
	}
	e.mu.Unlock()
	if c != nil && shared != nil && c.from == oldSet && c.to == set && c.delta == nil {
		d := *shared
		c.delta = &d
	}
	if s.cfg.OnOverflow != nil {
		for range overflowed {
			s.cfg.OnOverflow(k)
		}
	}
	return next, true
}

// same reports whether a and b carry the same information, from c when it holds the answer
// for them (a nil c holds nothing).
func (c *DiffCache) same(a, b *AddressSet) bool {
	if c == nil {
		return a.Equal(b)
	}
	if c.from != a || c.to != b {
		*c = DiffCache{from: a, to: b, equal: a.Equal(b)}
	}
	return c.equal
}

// diff returns the delta from a to b held by c, or nil.
func (c *DiffCache) diff(a, b *AddressSet) *Delta {
	if c == nil || c.from != a || c.to != b {
		return nil
	}
	return c.delta
}

// Release forgets k when it has no subscriptions (a replica that no longer owns a service
// releases its ports). It reports whether k was removed.
func (s *Store) Release(k Key) bool {
	removed := false
	s.entries.Compute(k, func(e *entry, loaded bool) (*entry, bool) {
		if !loaded {
			return e, true
		}
		e.mu.Lock()
		defer e.mu.Unlock()
		if len(e.subs) > 0 {
			return e, false
		}
		removed = true
		return e, true
	})
	return removed
}

// Subscribers returns the number of open subscriptions to k.
func (s *Store) Subscribers(k Key) int {
	e, ok := s.entries.Load(k)
	if !ok {
		return 0
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.subs)
}

// Subscribe opens a subscription to k whose queue holds at most capacity deltas
// (DefaultQueueCapacity when capacity <= 0). Its first delta is the full current state.
// The caller must Close it.
func (s *Store) Subscribe(k Key, capacity int) *Subscription {
	if capacity <= 0 {
		capacity = DefaultQueueCapacity
	}
	sub := &Subscription{
		store:    s,
		key:      k,
		capacity: capacity,
		initial:  true,
		notify:   make(chan struct{}, 1),
	}
	for {
		e := s.entry(k)
		e.mu.Lock()
		// The entry may have been released between entry() and Lock; retry on the live one.
		if cur, ok := s.entries.Load(k); !ok || cur != e {
			e.mu.Unlock()
			continue
		}
		sub.e = e
		e.subs[sub] = struct{}{}
		e.mu.Unlock()
		break
	}
	sub.wake() // the initial state is ready to be taken (a publication may have woken it already)
	return sub
}
