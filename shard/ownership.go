package shard

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/meridian-mesh/meridian/ring"
)

// Membership is the ring of replicas this one belongs to. *ring.Cluster implements it.
// Ring must be lock-free; Subscribe's channel has one slot and coalesces changes.
type Membership interface {
	Ring() *ring.Ring
	Self() ring.Member
	Subscribe() (<-chan struct{}, func())
	Joined() bool
	// Settled reports whether a cold start's wait is over (ring.Config.ColdStartWait): the
	// replica loads nothing before.
	Settled() bool
}

var _ Membership = (*ring.Cluster)(nil)

// standaloneName is what a replica without a ring calls itself (in ForwardedHeader and logs).
const standaloneName = "standalone"

// ownership says which services this replica serves and who owns the others: the ring as
// streams follow it. It holds one ringView at a time and swaps it atomically on every ring
// change, so that lookups take no lock. The index has its own filter (Index.SetOwns), which
// the ring follower moves first: a replica loads what it gains before its streams move.
type ownership struct {
	self string   // this replica's member name
	key  ShardKey // what places a service in the ring
	mu   sync.Mutex
	cur  atomic.Pointer[ringView]

	// Guarded by mu: the relayed calls to cancel when their service moves or the replica
	// stops (so that a relayed stream costs no goroutine to watch the ring beside its
	// blocking Recv), and whether it stopped.
	watching map[*moveWatch]struct{}
	stopped  bool
}

// ringView is one ring as a replica sees it. It never changes once published; changed is
// closed when the next view replaces it, which wakes every stream waiting on it.
type ringView struct {
	ring    *ring.Ring // nil without membership: this replica owns everything
	self    string
	key     ShardKey
	changed chan struct{}
}

// newOwnership returns the ownership of the replica named self, starting with ring r (nil:
// a replica without a ring, which owns everything).
func newOwnership(self string, key ShardKey, r *ring.Ring) *ownership {
	o := &ownership{self: self, key: key, watching: map[*moveWatch]struct{}{}}
	o.cur.Store(&ringView{ring: r, self: self, key: key, changed: make(chan struct{})})
	return o
}

// load returns the current view.
func (o *ownership) load() *ringView { return o.cur.Load() }

// swap publishes r as the current view, wakes every stream waiting on the old one, and
// cancels the relayed calls whose service r gives to another member (or to this one).
func (o *ownership) swap(r *ring.Ring) {
	o.mu.Lock()
	defer o.mu.Unlock()
	old := o.cur.Load()
	v := &ringView{ring: r, self: o.self, key: o.key, changed: make(chan struct{})}
	o.cur.Store(v)
	close(old.changed)
	for w := range o.watching {
		if w.movedIn(v) {
			delete(o.watching, w)
			w.cancel(errMoved)
		}
	}
}

// stop cancels every relayed call (errStopping), and those watched from now on at once.
func (o *ownership) stop() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.stopped = true
	for w := range o.watching {
		delete(o.watching, w)
		w.cancel(errStopping)
	}
}

// moveWatch is a relayed call to owner for k, which ownership cancels (cancel) when the ring
// gives k to another member or the replica stops. It is in ownership.watching while it
// waits.
type moveWatch struct {
	k      ServiceKey
	owner  string // the owner's address
	cancel context.CancelCauseFunc
}

// movedIn reports whether v gives w's service to someone other than w's owner.
func (w *moveWatch) movedIn(v *ringView) bool {
	next, local := v.owner(w.k)
	return local || next.Addr != w.owner
}

// watch starts w, whose owner was found in view v: it is cancelled at once if the replica
// stopped or the ring changed since v and moved its service.
func (o *ownership) watch(w *moveWatch, v *ringView) {
	o.mu.Lock()
	defer o.mu.Unlock()
	switch cur := o.cur.Load(); {
	case o.stopped:
		w.cancel(errStopping)
	case cur != v && w.movedIn(cur):
		w.cancel(errMoved)
	default:
		o.watching[w] = struct{}{}
	}
}

// unwatch ends w's watch (when its call ends).
func (o *ownership) unwatch(w *moveWatch) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.watching, w)
}

// owner returns the owner of k and whether this replica serves k itself (it owns k, or the
// view has no ring or no members). It does not allocate.
func (v *ringView) owner(k ServiceKey) (ring.Member, bool) {
	if v.ring == nil {
		return ring.Member{}, true
	}
	m := v.ring.OwnerOfHash(v.key.hash(k))
	return m, m.Name == v.self || m.Name == ""
}

// ownsFunc returns the index filter for ring r: the services the member self owns in it,
// placed by key.
func ownsFunc(r *ring.Ring, self string, key ShardKey) OwnsFunc {
	return func(k ServiceKey) bool { return r.OwnsHash(key.hash(k), self) }
}
