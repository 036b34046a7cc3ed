package snapshot

import "sync"

// Subscription carries the deltas of one key to one reader, through a bounded queue.
//
// Bound: at most capacity deltas are queued. When a publication finds the queue full, the
// queued deltas are discarded and the subscription is marked to resynchronise: its next delta
// is the diff between the last snapshot it delivered and the newest one. Nothing is lost (the
// reader still converges on the newest state) and the reader is not closed. Memory per
// subscription is therefore bounded by capacity deltas plus one snapshot.
type Subscription struct {
	store    *Store
	key      Key
	e        *entry
	capacity int
	notify   chan struct{}

	mu        sync.Mutex
	initial   bool      // the first delta (the full state) has not been taken yet
	resync    bool      // the queue overflowed: next delta is diff(base, newest)
	base      *Snapshot // the snapshot the reader holds after the deltas it took
	tail      *Snapshot // the snapshot the reader holds after the queued deltas too
	queue     []queued
	head      int
	closed    bool
	overflows uint64
}

type queued struct {
	d  *Delta
	to *Snapshot
}

// C returns a channel that receives a value when Next may have a delta. It has one slot:
// several publications coalesce into one wake-up.
func (sub *Subscription) C() <-chan struct{} { return sub.notify }

// Key returns the subscribed key.
func (sub *Subscription) Key() Key { return sub.key }

// Overflows returns how many times this subscription's queue overflowed and was coalesced.
func (sub *Subscription) Overflows() uint64 {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	return sub.overflows
}

// offer queues the delta old->next. Called with the entry's lock held, in publication order.
// shared caches the old->next delta across subscribers. It reports an overflow.
func (sub *Subscription) offer(old, next *Snapshot, oldSet *AddressSet, shared **Delta) (overflow bool) {
	sub.mu.Lock()
	defer sub.wake()
	defer sub.mu.Unlock()
	if sub.closed || sub.initial || sub.resync {
		return false // Next computes from the newest snapshot anyway
	}
	if sub.tail != nil && sub.tail.Version >= next.Version {
		return false // a resync already took the reader to next or beyond
	}
	var d *Delta
	if sub.tail == old {
		if *shared == nil {
			dd := Diff(oldSet, next.Set)
			dd.Version = next.Version
			*shared = &dd
		}
		d = *shared
	} else {
		var from *AddressSet
		if sub.tail != nil {
			from = sub.tail.Set
		}
		dd := Diff(from, next.Set)
		dd.Version = next.Version
		d = &dd
	}
	if len(sub.queue)-sub.head >= sub.capacity {
		// Full: discard what is queued and resynchronise from base on the next read.
		clear(sub.queue)
		sub.queue, sub.head = nil, 0
		sub.resync = true
		sub.tail = nil
		sub.overflows++
		return true
	}
	if sub.head > 0 && len(sub.queue) == cap(sub.queue) {
		// Room for what is pending before growing: a reader that keeps a few deltas behind
		// never empties the queue (Next resets it only then), and appending alone would grow
		// the array with every publication, not with capacity.
		n := copy(sub.queue, sub.queue[sub.head:])
		clear(sub.queue[n:])
		sub.queue, sub.head = sub.queue[:n], 0
	}
	sub.queue = append(sub.queue, queued{d: d, to: next})
	sub.tail = next
	return false
}

func (sub *Subscription) wake() {
	select {
	case sub.notify <- struct{}{}:
	default:
	}
}

// Next returns the next delta for the reader, or false when there is none now (wait on C).
// The first delta is the full current state with Initial set (To is nil when nothing was ever
// published for the key). Deltas that change nothing are skipped. Next must not be called
// concurrently with itself.
func (sub *Subscription) Next() (Delta, bool) {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	if sub.closed {
		return Delta{}, false
	}
	if sub.initial || sub.resync {
		latest := sub.e.cur.Load()
		var from, to *AddressSet
		if sub.base != nil && !sub.initial {
			from = sub.base.Set
		}
		if latest != nil {
			to = latest.Set
		}
		d := Diff(from, to)
		d.Initial = sub.initial
		if latest != nil {
			d.Version = latest.Version
		}
		sub.initial, sub.resync = false, false
		sub.base, sub.tail = latest, latest
		clear(sub.queue)
		sub.queue, sub.head = nil, 0
		if d.Initial || !d.Empty() || existenceChanged(from, to) {
			return d, true
		}
		return Delta{}, false
	}
	for sub.head < len(sub.queue) {
		q := sub.queue[sub.head]
		sub.queue[sub.head] = queued{}
		sub.head++
		if sub.head == len(sub.queue) {
			sub.queue, sub.head = sub.queue[:0], 0
		}
		from := sub.base
		sub.base = q.to
		var fromSet *AddressSet
		if from != nil {
			fromSet = from.Set
		}
		if !q.d.Empty() || existenceChanged(fromSet, q.to.Set) {
			return *q.d, true
		}
	}
	return Delta{}, false
}

func existenceChanged(a, b *AddressSet) bool {
	ea, eb := a != nil && a.Exists, b != nil && b.Exists
	return ea != eb
}

// Close ends the subscription and releases its queue. It is idempotent.
func (sub *Subscription) Close() {
	sub.e.mu.Lock()
	delete(sub.e.subs, sub)
	sub.e.mu.Unlock()
	sub.mu.Lock()
	sub.closed = true
	sub.queue, sub.head, sub.base, sub.tail = nil, 0, nil, nil
	sub.mu.Unlock()
}

// Base returns the snapshot the reader holds after the deltas it has taken (nil before the
// first). A stream handing its reader over to another replica starts from it.
func (sub *Subscription) Base() *Snapshot {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	return sub.base
}
