package shard

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/meridian-mesh/meridian/ring"
)

// Membership is the ring of replicas this one belongs to. *ring.Cluster implements it.
// Ring must be lock-free; Subscribe's channel has one slot and coalesces changes.
type Membership interface {
	Ring() *ring.Ring
	Self() ring.Member
	Subscribe() (<-chan struct{}, func())
	Joined() bool
}

var _ Membership = (*ring.Cluster)(nil)

// NonOwnerMode says what a replica does with a stream for a service it does not own.
type NonOwnerMode string

const (
	// Forward relays the stream to the owner, so any unmodified Linkerd proxy works.
	Forward NonOwnerMode = "forward"
	// Redirect refuses with FailedPrecondition naming the owner (see RedirectOwner).
	Redirect NonOwnerMode = "redirect"
)

// ParseNonOwnerMode parses the --non-owner flag.
func ParseNonOwnerMode(s string) (NonOwnerMode, error) {
	switch NonOwnerMode(s) {
	case Forward, Redirect:
		return NonOwnerMode(s), nil
	}
	return "", fmt.Errorf("non-owner mode %q: want forward or redirect", s)
}

// ownership is the replica's current view of the ring, swapped atomically. changed is closed
// (and replaced) on every ring change, so that streams can wait for one.
type ownership struct {
	ring    *ring.Ring // nil without membership: this replica owns everything
	self    string
	changed chan struct{}
}

func (o *ownership) owner(k ServiceKey) (ring.Member, bool) {
	if o.ring == nil {
		return ring.Member{}, true
	}
	m := o.ring.Owner(k.String())
	return m, m.Name == o.self || m.Name == ""
}

type ringState struct {
	mu  sync.Mutex // serialises changes
	cur atomic.Pointer[ownership]
}

func newRingState() *ringState {
	rs := &ringState{}
	rs.cur.Store(&ownership{changed: make(chan struct{})})
	return rs
}

func (rs *ringState) load() *ownership { return rs.cur.Load() }

// swap publishes a new ring and wakes every stream waiting on the old one.
func (rs *ringState) swap(r *ring.Ring, self string) (old *ownership) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	old = rs.cur.Load()
	rs.cur.Store(&ownership{ring: r, self: self, changed: make(chan struct{})})
	close(old.changed)
	return old
}

// followRing applies every ring change until ctx ends: it first takes the services it gains
// (the source replays its objects, now admitted by the new ownership), then wakes the streams
// so that those of services it lost move to their new owners, and releases what nobody holds.
func (r *Replica) followRing(ctx context.Context) error {
	ch, cancel := r.members.Subscribe()
	defer cancel()
	self := r.members.Self().Name
	for {
		cur := r.members.Ring()
		if prev := r.ring.load(); prev.ring == nil || !prev.ring.Equal(cur) {
			r.applyRing(ctx, prev.ring, cur, self)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ch:
		}
	}
}

func (r *Replica) applyRing(ctx context.Context, prev, cur *ring.Ring, self string) {
	gained := prev == nil
	if prev != nil {
		for p := 0; p < cur.Partitions(); p++ {
			if cur.PartitionOwner(p).Name == self && prev.PartitionOwner(p).Name != self {
				gained = true
				break
			}
		}
	}
	r.idx.SetOwns(func(k ServiceKey) bool { return cur.Owns(k.String(), self) })
	if gained {
		r.replaying.Add(1)
		// The initial delivery filtered by an older ring; replay after it has finished.
		for !r.src.Synced() && ctx.Err() == nil {
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
		}
		if err := r.src.Replay(ctx); err != nil && ctx.Err() == nil {
			r.log.Error("replay of the source after a ring change failed; gained services may be incomplete", zap.Error(err))
		}
		r.replaying.Add(-1)
	}
	r.ring.swap(cur, self)
	dropped := r.idx.DropUnowned()
	r.m.ownershipChanges.Inc()
	r.log.Info("ring changed", zap.Int("members", cur.Len()), zap.Bool("gained", gained), zap.Int("released", dropped), zap.Int("owned", r.idx.Len()))
}

// RingHandler serves the ring as this replica sees it, with the share of the known services
// each member owns, as JSON (what `meridian ring` prints).
func (r *Replica) RingHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		type member struct {
			ring.MemberStatus
			Services int `json:"services"`
		}
		out := struct {
			Self     string   `json:"self"`
			ID       string   `json:"id"`
			Services int      `json:"services"`
			Members  []member `json:"members"`
		}{}
		o := r.ring.load()
		if o.ring == nil {
			http.Error(w, "this replica runs without a ring", http.StatusNotFound)
			return
		}
		keys := r.idx.KnownServices()
		shares := o.ring.Shares(keys)
		st := o.ring.Status()
		out.Self, out.ID, out.Services = o.self, st.ID, len(keys)
		for _, m := range st.Members {
			out.Members = append(out.Members, member{MemberStatus: m, Services: shares[m.Name]})
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(out)
	})
}
