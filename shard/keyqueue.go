package shard

import "sync"

// keyQueue is the index's queue of services to recompute, with the contract of client-go's
// workqueue that it replaces: a key is queued once however often it is added; a worker that
// Gets a key holds it until Done, and a key added meanwhile is handed out again after Done,
// never to two workers at once; after ShutDown, Add does nothing and Get hands out what is
// still queued, then reports quit.
//
// Unlike client-go's, its memory follows what is queued. A Go map or slice keeps the room of
// its largest size, and a replica queues every service it holds at once when it loads them (a
// ring of one loads the whole cluster, before the other replicas join and take their shares).
// client-go's queue then kept about 130 bytes per service of that first load for good
// (BenchmarkKeyQueueRetained); this one lets the room go once the burst is drained.
type keyQueue[K comparable] struct {
	mu         sync.Mutex
	cond       sync.Cond
	order      []K // queued keys, from head
	head       int
	dirty      map[K]struct{} // queued (in order, or to be once Done)
	processing map[K]struct{}
	peak       int // largest len(dirty) since dirty was made
	shutdown   bool
}

// shrinkAbove is the size of a drained burst (keys queued at once) whose room the queue lets
// go; smaller ones it keeps, for the next.
const shrinkAbove = 1024

// compactAbove is the number of handed-out keys at the front of the queue's array above which,
// once they are half of it or more, the queued keys are moved to its start.
const compactAbove = 64

func newKeyQueue[K comparable]() *keyQueue[K] {
	q := &keyQueue[K]{dirty: map[K]struct{}{}, processing: map[K]struct{}{}}
	q.cond.L = &q.mu
	return q
}

// Add queues k unless it is queued already, or after ShutDown.
func (q *keyQueue[K]) Add(k K) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.shutdown {
		return
	}
	if _, ok := q.dirty[k]; ok {
		return
	}
	q.dirty[k] = struct{}{}
	q.peak = max(q.peak, len(q.dirty))
	if _, ok := q.processing[k]; ok {
		return // Done queues it
	}
	q.order = append(q.order, k)
	q.cond.Signal()
}

// Get waits for a queued key and hands it out until Done. quit is true when the queue is shut
// down and empty.
func (q *keyQueue[K]) Get() (k K, quit bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for q.head == len(q.order) && !q.shutdown {
		q.cond.Wait()
	}
	if q.head == len(q.order) {
		return k, true
	}
	k = q.order[q.head]
	var zero K
	q.order[q.head] = zero // the array does not keep the key's strings
	q.head++
	switch {
	case q.head == len(q.order):
		q.order, q.head = q.order[:0], 0
		if cap(q.order) > shrinkAbove {
			q.order = nil
		}
	case q.head >= compactAbove && q.head*2 >= len(q.order):
		// Under steady load the queue may never drain: without this, every append that
		// outgrows the array would copy the handed-out prefix too, and the array would
		// grow with the keys added since the queue was last empty.
		n := copy(q.order, q.order[q.head:])
		clear(q.order[n:])
		q.order, q.head = q.order[:n], 0
	}
	delete(q.dirty, k)
	q.processing[k] = struct{}{}
	if len(q.dirty) == 0 && q.peak > shrinkAbove {
		q.dirty, q.peak = map[K]struct{}{}, 0
	}
	return k, false
}

// Done ends the processing of k, which Get handed out; k is queued again if it was added
// meanwhile.
func (q *keyQueue[K]) Done(k K) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.processing, k)
	if _, ok := q.dirty[k]; ok {
		q.order = append(q.order, k)
		q.cond.Signal()
	}
}

// Len returns the number of keys waiting to be handed out.
func (q *keyQueue[K]) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.order) - q.head
}

// ShutDown stops Add and, once the queue is empty, wakes every Get with quit.
func (q *keyQueue[K]) ShutDown() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.shutdown = true
	q.cond.Broadcast()
}
