package source

import (
	"sync"
	"time"
)

// keyQueue is a queue of keys to process, each held once and handed to one worker at a time
// (a key added while it is processed is processed again after), that can tell when nothing
// is queued or in progress (idle). A key whose processing failed is added again after a
// backoff (retryAfter: 5ms doubling to 5 minutes), with one timer per key at most. close
// stops everything: get returns false, timers are stopped. Safe for concurrent use.
type keyQueue struct {
	mu         sync.Mutex
	cond       *sync.Cond
	order      []string
	dirty      map[string]bool
	processing map[string]bool
	again      map[string]bool // added while processing
	failures   map[string]int
	timers     map[string]*time.Timer
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

// get returns the next key, waiting for one, or false once the queue is closed.
func (q *keyQueue) get() (string, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.order) == 0 && !q.closed {
		q.cond.Wait()
	}
	if q.closed {
		return "", false
	}
	k := q.order[0]
	q.order = q.order[1:]
	delete(q.dirty, k)
	q.processing[k] = true
	return k, true
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
	return len(q.order) == 0 && len(q.processing) == 0
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
