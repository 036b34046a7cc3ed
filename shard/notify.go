package shard

import "sync"

// notifier wakes the watchers of a key when something about it changes: a watcher takes the
// key's current channel, which notify closes (and replaces) on the next change. Only keys
// with watchers hold a channel, so a change of a key nobody watches costs one map lookup.
// Safe for concurrent use.
type notifier[K comparable] struct {
	mu sync.Mutex
	m  map[K]*note
}

type note struct {
	ch   chan struct{}
	refs int
}

// watch returns the channel closed on k's next change and the function that stops watching
// (the channel then may never close). Call watch again after each wake-up.
func (n *notifier[K]) watch(k K) (<-chan struct{}, func()) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.m == nil {
		n.m = map[K]*note{}
	}
	e := n.m[k]
	if e == nil {
		e = &note{ch: make(chan struct{})}
		n.m[k] = e
	}
	e.refs++
	var once sync.Once
	return e.ch, func() {
		once.Do(func() {
			n.mu.Lock()
			defer n.mu.Unlock()
			if e.refs--; e.refs == 0 && n.m[k] == e {
				delete(n.m, k)
			}
		})
	}
}

// notify wakes k's watchers.
func (n *notifier[K]) notify(k K) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if e := n.m[k]; e != nil {
		close(e.ch)
		e.ch = make(chan struct{})
	}
}
