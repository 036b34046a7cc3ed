package source

import (
	"sync"
	"time"

	"github.com/meridian-mesh/meridian/translator"
)

// recentFor is how long the projection of a pod the watch dropped as unwanted is kept aside,
// and recentMax how many are kept at most (the oldest go first): a pod a slice starts naming
// within recentFor of its last change is stored from that copy rather than read. That is how
// a rollout goes: a new pod turns ready, and the EndpointSlice controller names it in its
// slice a moment later; read one at a time, a rollout of thousands of pods would wait for
// the client's request budget, shared with every other request of the replica.
const (
	recentFor = 30 * time.Second
	recentMax = 4096
)

// recentDrops holds the projections of the pods the watch dropped as unwanted lately, by key
// (namespace/name), each for recentFor and at most recentMax of them. Safe for concurrent use.
//
// Its generation counts the clears: a watch that a list or a newer watch replaced may still
// pass an event on after the clear (a filteredWatch's loop outlives its Stop by an event), and
// its drop, older than the events missed meanwhile, is not kept.
type recentDrops struct {
	mu    sync.Mutex
	gen   uint64
	pods  map[string]recentPod
	order []recentKey // keys in the order they were put, from head on; some stale (put again since, or taken)
	head  int
}

type recentPod struct {
	pod *translator.Pod
	at  time.Time
}

type recentKey struct {
	key string
	at  time.Time
}

// generation returns the number of clears so far.
func (r *recentDrops) generation() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.gen
}

// put holds p, dropped at now by a watch started at generation gen, in place of what it held
// of the pod; it does nothing when a clear came after that watch started.
func (r *recentDrops) put(p *translator.Pod, now time.Time, gen uint64) {
	key := p.Namespace() + "/" + p.Name
	r.mu.Lock()
	defer r.mu.Unlock()
	if gen != r.gen {
		return
	}
	if r.pods == nil {
		r.pods = map[string]recentPod{}
	}
	r.pods[key] = recentPod{pod: p, at: now}
	r.order = append(r.order, recentKey{key: key, at: now})
	r.pruneLocked(now)
}

// take returns the pod key if it was dropped less than recentFor before now, and lets it go.
func (r *recentDrops) take(key string, now time.Time) *translator.Pod {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.pods[key]
	if !ok {
		return nil
	}
	delete(r.pods, key)
	if now.Sub(e.at) >= recentFor {
		return nil
	}
	return e.pod
}

// forget lets the pod key go.
func (r *recentDrops) forget(key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.pods, key)
}

// clear lets every pod go, and starts a new generation.
func (r *recentDrops) clear() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pods, r.order, r.head = nil, nil, 0
	r.gen++
}

// prune lets go the pods dropped recentFor or more before now.
func (r *recentDrops) prune(now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pruneLocked(now)
}

// pruneLocked lets go, oldest first, the pods dropped recentFor or more before now, and more
// while over recentMax; r.mu is held.
func (r *recentDrops) pruneLocked(now time.Time) {
	for r.head < len(r.order) {
		k := r.order[r.head]
		e, ok := r.pods[k.key]
		current := ok && e.at.Equal(k.at) // else stale: the pod was put again since, or let go
		if current && now.Sub(k.at) < recentFor && len(r.pods) <= recentMax {
			break
		}
		if current {
			delete(r.pods, k.key)
		}
		r.order[r.head] = recentKey{}
		r.head++
	}
	if r.head == len(r.order) {
		r.order, r.head = nil, 0 // not the array a burst grew
	} else if r.head > 64 && r.head > len(r.order)/2 {
		n := copy(r.order, r.order[r.head:])
		clear(r.order[n:])
		r.order, r.head = r.order[:n], 0
	}
}
