package source

import (
	"sync"
	"time"
)

// keyQueue is a queue of keys to process, each held once and handed to one worker at a time
// (a key added while it is processed is processed again after), that can tell when nothing
// is queued or in progress (idle). A key whose processing failed is added again after a
// backoff (retryAfter: 5ms doubling to 5 minutes), with one timer per key at most. close
// stops everything: next returns false, timers are stopped. Safe for concurrent use.
//
// Keys are handed out one at a time, or, when many are queued, all at once as a batch (next):
// one batch at most is out at a time, and while it is out the queued keys that would make the
// next one (at least batchMin) wait for it rather than go one by one. Each key of a batch is
// in progress like a key handed out alone, until the batch's worker ends it with done, settle
// or giveBack; endBatch then lets the next batch go. A key given back is handed out alone
// only, never in a batch (singles), so that what a batch could not do is not retried by
// another batch: keys come back to batches when they are added anew.
type keyQueue struct {
	mu    sync.Mutex
	cond  *sync.Cond
	order []string // queued keys a batch may take
	// singles are queued keys given back by a batch: handed out one at a time, before order.
	singles    []string
	dirty      map[string]bool // queued, in order or singles
	processing map[string]bool
	again      map[string]bool // added while processing
	failures   map[string]int
	timers     map[string]*time.Timer
	batchOut   bool
	closed     bool
}

func newKeyQueue() *keyQueue {
	q := &keyQueue{dirty: map[string]bool{}, processing: map[string]bool{}, again: map[string]bool{},
		failures: map[string]int{}, timers: map[string]*time.Timer{}}
	q.cond = sync.NewCond(&q.mu)
	return q
}

func (q *keyQueue) add(k string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.addLocked(k)
}

// addAll adds keys at once: a worker waiting in next sees them all, and can take them as a
// batch, rather than the first few alone.
func (q *keyQueue) addAll(keys []string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, k := range keys {
		q.addLocked(k)
	}
}

func (q *keyQueue) addLocked(k string) {
	switch {
	case q.closed:
	case q.processing[k]:
		q.again[k] = true
	case !q.dirty[k]:
		q.dirty[k] = true
		q.order = append(q.order, k)
		q.cond.Signal()
	}
}

// next returns the next work, waiting for some: every key of order as a batch (batch true)
// when at least batchMin are queued there and no batch is out; else the first given-back
// key, or the first of order, alone (one key, batch false), unless those of order wait for
// the next batch (one is out and at least batchMin are queued). It returns false once the
// queue is closed. A batchMin of 0 or less makes no batches.
func (q *keyQueue) next(batchMin int) (keys []string, batch, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for !q.closed {
		full := batchMin > 0 && len(q.order) >= batchMin
		switch {
		case full && !q.batchOut:
			keys, q.order = q.order, nil
			for _, k := range keys {
				delete(q.dirty, k)
				q.processing[k] = true
			}
			q.batchOut = true
			return keys, true, true
		case len(q.singles) > 0:
			return []string{q.take(&q.singles)}, false, true
		case len(q.order) > 0 && !full:
			return []string{q.take(&q.order)}, false, true
		}
		q.cond.Wait()
	}
	return nil, false, false
}

// take removes the first key of *from and marks it in progress.
func (q *keyQueue) take(from *[]string) string {
	k := (*from)[0]
	*from = (*from)[1:]
	delete(q.dirty, k)
	q.processing[k] = true
	return k
}

// done ends the processing of k; failed adds it again after its backoff, else its failures
// are forgotten.
func (q *keyQueue) done(k string, failed bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.processing, k)
	if q.again[k] {
		delete(q.again, k)
		q.addLocked(k)
	}
	if !failed {
		delete(q.failures, k)
		return
	}
	n := q.failures[k]
	q.failures[k] = n + 1
	if q.timers[k] != nil || q.closed {
		return
	}
	q.timers[k] = time.AfterFunc(retryAfter(n), func() {
		q.mu.Lock()
		defer q.mu.Unlock()
		delete(q.timers, k)
		q.addLocked(k)
	})
}

// settle is done(k, false), except that k, added again while it was processed, is not
// queued if current reports that what its processing did is still up to date. current is
// called with the queue's lock held, so that an add that follows what it reads is not lost:
// it must not call the queue.
func (q *keyQueue) settle(k string, current func() bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.again[k] && current() {
		delete(q.again, k)
	}
	delete(q.processing, k)
	if q.again[k] {
		delete(q.again, k)
		q.addLocked(k)
	}
	delete(q.failures, k)
}

// giveBack ends the processing of k, a key of the batch out, which the batch could not
// process: it is queued again, to be handed out alone (an add while it was processed is
// included). Its failures are kept.
func (q *keyQueue) giveBack(k string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.processing, k)
	delete(q.again, k)
	if q.closed || q.dirty[k] {
		return
	}
	q.dirty[k] = true
	q.singles = append(q.singles, k)
	q.cond.Signal()
}

// endBatch ends the batch out, whose keys have all been ended (done, settle or giveBack):
// the next may go.
func (q *keyQueue) endBatch() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.batchOut = false
	q.cond.Broadcast()
}

// retryAfter is the backoff after n earlier failures: 5ms doubling to 5 minutes.
func retryAfter(n int) time.Duration {
	d := 5 * time.Millisecond
	for ; n > 0 && d < 5*time.Minute; n-- {
		d *= 2
	}
	return min(d, 5*time.Minute)
}

// idle reports whether no key is queued or being processed (keys waiting for a retry do not
// count).
func (q *keyQueue) idle() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.order) == 0 && len(q.singles) == 0 && len(q.processing) == 0
}

func (q *keyQueue) close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	for _, t := range q.timers {
		t.Stop()
	}
	q.timers = map[string]*time.Timer{}
	q.cond.Broadcast()
}
