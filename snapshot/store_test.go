package snapshot

import (
	"fmt"
	"net/netip"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meridian-mesh/meridian/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.Main(m, nil)) }

func ep(i int) *Endpoint {
	a := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
	return &Endpoint{Addr: netip.AddrPortFrom(a, 8080), Weight: 10000, Pod: fmt.Sprintf("pod-%d", i)}
}

// set builds an address set with endpoints for the given ids.
func set(ids ...int) *AddressSet {
	s := &AddressSet{Exists: true, Endpoints: make([]*Endpoint, 0, len(ids))}
	for _, i := range ids {
		s.Endpoints = append(s.Endpoints, ep(i))
	}
	s.Endpoints = SortEndpoints(s.Endpoints)
	return s
}

func rangeSet(lo, hi int) *AddressSet {
	ids := make([]int, 0, hi-lo)
	for i := lo; i < hi; i++ {
		ids = append(ids, i)
	}
	return set(ids...)
}

// view is what a reader holds after applying deltas.
type view map[netip.AddrPort]*Endpoint

func (v view) apply(d Delta) {
	if d.Initial {
		clear(v)
	}
	for _, a := range d.Remove {
		delete(v, a)
	}
	for _, e := range d.Add {
		v[e.Addr] = e
	}
}

func (v view) equals(s *AddressSet) bool {
	if s == nil {
		return len(v) == 0
	}
	if len(v) != s.Len() {
		return false
	}
	for _, e := range s.Endpoints {
		if !e.Equal(v[e.Addr]) {
			return false
		}
	}
	return true
}

var key = Key{Namespace: "ns", Name: "svc", Port: 80}

func waitC(t *testing.T, sub *Subscription) {
	t.Helper()
	testutil.Recv(t, sub.C(), 5*time.Second, "a wake-up")
}

func TestPublishVersionsAndNoOp(t *testing.T) {
	s := NewStore(StoreConfig{})
	if s.Load(key) != nil {
		t.Fatal("Load of unknown key should be nil")
	}
	s1, changed := s.Publish(key, set(1, 2))
	if !changed || s1.Version != 1 {
		t.Fatalf("first publish: changed=%v version=%d", changed, s1.Version)
	}
	s2, changed := s.Publish(key, set(1, 2))
	if changed || s2 != s1 {
		t.Fatal("publishing an equal set must be a no-op")
	}
	s3, changed := s.Publish(key, set(1))
	if !changed || s3.Version != 2 || s.Load(key) != s3 {
		t.Fatalf("second publish: changed=%v version=%d", changed, s3.Version)
	}
	if s1.Set.Len() != 2 {
		t.Fatal("an earlier snapshot changed after a later publish")
	}
}

func TestSubscriptionInitialThenDeltas(t *testing.T) {
	s := NewStore(StoreConfig{})
	s.Publish(key, set(1, 2, 3))
	sub := s.Subscribe(key, 4)
	defer sub.Close()
	waitC(t, sub)
	d, ok := sub.Next()
	if !ok || !d.Initial || len(d.Add) != 3 || len(d.Remove) != 0 {
		t.Fatalf("initial delta = %+v ok=%v", d, ok)
	}
	if _, ok := sub.Next(); ok {
		t.Fatal("nothing more expected")
	}
	s.Publish(key, set(1, 2)) // 3 not ready any more
	waitC(t, sub)
	d, ok = sub.Next()
	if !ok || len(d.Add) != 0 || len(d.Remove) != 1 || d.Remove[0] != ep(3).Addr {
		t.Fatalf("remove delta = %+v", d)
	}
	changed := set(1, 2)
	i := slices.Index(changed.Endpoints, changed.Lookup(ep(2).Addr))
	e := *changed.Endpoints[i]
	e.SetIdentity("web.ns.serviceaccount.identity.linkerd.cluster.local")
	changed.Endpoints[i] = &e
	s.Publish(key, changed)
	waitC(t, sub)
	d, _ = sub.Next()
	if len(d.Add) != 1 || d.Add[0].Identity() == "" || len(d.Remove) != 0 {
		t.Fatalf("changed endpoint should be re-added: %+v", d)
	}
}

func TestSubscriptionBeforeFirstPublish(t *testing.T) {
	s := NewStore(StoreConfig{})
	sub := s.Subscribe(key, 4)
	defer sub.Close()
	d, ok := sub.Next()
	if !ok || !d.Initial || d.To != nil {
		t.Fatalf("initial delta before publish = %+v", d)
	}
	s.Publish(key, set(1))
	waitC(t, sub)
	d, ok = sub.Next()
	if !ok || len(d.Add) != 1 {
		t.Fatalf("delta after first publish = %+v", d)
	}
}

// TestSetLabelChangeResendsEndpoints: a change to the set's labels alone (a mirror's
// target_cluster) re-sends every endpoint, so that clients take the new labels.
func TestSetLabelChangeResendsEndpoints(t *testing.T) {
	s := NewStore(StoreConfig{})
	before := set(1, 2)
	before.Labels = []Label{{Key: "target_cluster", Value: "east"}}
	s.Publish(key, before)
	sub := s.Subscribe(key, 4)
	defer sub.Close()
	waitC(t, sub)
	sub.Next()
	after := set(1, 2)
	after.Labels = []Label{{Key: "target_cluster", Value: "west"}}
	s.Publish(key, after)
	waitC(t, sub)
	d, ok := sub.Next()
	if !ok || len(d.Add) != 2 || len(d.Remove) != 0 || d.To.Labels[0].Value != "west" {
		t.Fatalf("relabelled set: %+v ok=%v, want both endpoints re-sent with the new labels", d, ok)
	}
	if d := Diff(after, set(2)); len(d.Add) != 1 || len(d.Remove) != 1 { // labels dropped, 1 gone
		t.Errorf("relabelled and shrunk: %+v", d)
	}
}

func TestExistenceChangeWithoutEndpoints(t *testing.T) {
	s := NewStore(StoreConfig{})
	s.Publish(key, &AddressSet{Exists: true})
	sub := s.Subscribe(key, 4)
	defer sub.Close()
	sub.Next()
	s.Publish(key, &AddressSet{Exists: false})
	waitC(t, sub)
	d, ok := sub.Next()
	if !ok || d.To == nil || d.To.Exists {
		t.Fatalf("deletion of an empty service must be delivered: %+v ok=%v", d, ok)
	}
}

// A subscriber that stops reading while 10k updates flow keeps bounded memory, is not
// closed, and then receives exactly the final set.
func TestSlowSubscriberCoalesces(t *testing.T) {
	var overflows atomic.Int64
	s := NewStore(StoreConfig{OnOverflow: func(Key) { overflows.Add(1) }})
	s.Publish(key, rangeSet(0, 50))
	const capacity = 16
	slow := s.Subscribe(key, capacity)
	defer slow.Close()
	held := view{}
	d, _ := slow.Next()
	held.apply(d)

	maxQueued := 0
	for i := 1; i <= 10000; i++ {
		s.Publish(key, rangeSet(i%200, i%200+50))
		slow.mu.Lock()
		if n := len(slow.queue) - slow.head; n > maxQueued {
			maxQueued = n
		}
		slow.mu.Unlock()
	}
	if maxQueued > capacity {
		t.Fatalf("queue grew to %d, bound is %d", maxQueued, capacity)
	}
	if overflows.Load() == 0 || slow.Overflows() != uint64(overflows.Load()) {
		t.Fatalf("overflows: store callback %d, subscription %d", overflows.Load(), slow.Overflows())
	}
	for {
		d, ok := slow.Next()
		if !ok {
			break
		}
		held.apply(d)
	}
	if !held.equals(s.Load(key).Set) {
		t.Fatalf("slow subscriber holds %d endpoints, want the final %d", len(held), s.Load(key).Set.Len())
	}
}

// Concurrent publishers and readers: every reader converges on the final state.
func TestConcurrentReadersConverge(t *testing.T) {
	s := NewStore(StoreConfig{})
	s.Publish(key, rangeSet(0, 10))
	const readers = 8
	var wg sync.WaitGroup
	done := make(chan struct{})
	results := make([]view, readers)
	for r := range readers {
		sub := s.Subscribe(key, 1+r) // tiny queues so that some coalesce
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer sub.Close()
			v := view{}
			drain := func() {
				for {
					d, ok := sub.Next()
					if !ok {
						return
					}
					v.apply(d)
				}
			}
			for {
				select {
				case <-sub.C():
					drain()
				case <-done:
					drain()
					results[r] = v
					return
				}
			}
		}()
	}
	for i := 0; i < 2000; i++ {
		s.Publish(key, rangeSet(i%37, i%37+10+i%5))
	}
	close(done)
	testutil.Wait(t, 30*time.Second, "the readers to finish", wg.Wait)
	final := s.Load(key).Set
	for r, v := range results {
		if !v.equals(final) {
			t.Fatalf("reader %d holds %d endpoints, want %d", r, len(v), final.Len())
		}
	}
}

func TestReleaseKeepsSubscribedKeys(t *testing.T) {
	s := NewStore(StoreConfig{})
	s.Publish(key, set(1))
	sub := s.Subscribe(key, 1)
	if s.Release(key) {
		t.Fatal("a subscribed key must not be released")
	}
	sub.Close()
	sub.Close() // idempotent
	if !s.Release(key) || s.Load(key) != nil {
		t.Fatal("an unsubscribed key should be released")
	}
}

func TestLoadAllocatesNothing(t *testing.T) {
	s := NewStore(StoreConfig{})
	s.Publish(key, set(1))
	if n := testing.AllocsPerRun(1000, func() { _ = s.Load(key) }); n != 0 {
		t.Fatalf("Load allocates %.1f per call", n)
	}
}

// TestPublishSharedDiffsOnce publishes one change to several keys holding the same set
// through one DiffCache: every subscriber gets the change, with its key's version, and the
// keys share one delta (computed once).
func TestPublishSharedDiffsOnce(t *testing.T) {
	s := NewStore(StoreConfig{})
	keys := []Key{{Namespace: "ns", Name: "svc", Port: 80, View: "a-1"}, {Namespace: "ns", Name: "svc", Port: 80, View: "a-2"}}
	old, next := set(1, 2), set(2, 3)
	var subs []*Subscription
	for i, k := range keys {
		if i == 1 {
			s.Publish(k, set(9)) // an extra version, so that the keys' versions differ
		}
		s.Publish(k, old)
		sub := s.Subscribe(k, 4)
		defer sub.Close()
		sub.Next()
		subs = append(subs, sub)
	}
	var c DiffCache
	for _, k := range keys {
		if _, changed := s.PublishShared(k, next, &c); !changed {
			t.Fatalf("%v: not published", k)
		}
	}
	var deltas []Delta
	for i, sub := range subs {
		d, ok := sub.Next()
		if !ok || len(d.Add) != 1 || len(d.Remove) != 1 || d.Version != s.Load(keys[i]).Version {
			t.Fatalf("%v: delta %+v, version %d", keys[i], d, s.Load(keys[i]).Version)
		}
		deltas = append(deltas, d)
	}
	if &deltas[0].Add[0] != &deltas[1].Add[0] {
		t.Fatal("the keys computed their deltas separately")
	}
	// An unchanged set through the cache publishes nothing.
	if _, changed := s.PublishShared(keys[0], next, &c); changed {
		t.Fatal("the same set published again")
	}
}

// TestQueueBoundedForAReaderBehind: a reader that keeps one delta behind never overflows and
// never empties its queue; the queue's array stays near its capacity instead of growing with
// every publication (it held 231,424 slots after 200,000 publications).
func TestQueueBoundedForAReaderBehind(t *testing.T) {
	s := NewStore(StoreConfig{})
	k := Key{Namespace: "ns", Name: "web", Port: 80}
	set := func(i int) *AddressSet {
		return &AddressSet{Exists: true, Endpoints: []*Endpoint{{Addr: netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}), 80)}}}
	}
	s.Publish(k, set(0))
	sub := s.Subscribe(k, 128)
	defer sub.Close()
	sub.Next()           // the initial state
	s.Publish(k, set(1)) // one delta behind from here on
	for i := 2; i < 200000; i++ {
		s.Publish(k, set(i))
		d, ok := sub.Next()
		if !ok || d.Version == 0 {
			t.Fatalf("publication %d: no delta", i)
		}
	}
	sub.mu.Lock()
	pending, slots := len(sub.queue)-sub.head, cap(sub.queue)
	sub.mu.Unlock()
	if pending != 1 || slots > 2*128 || sub.Overflows() != 0 {
		t.Fatalf("%d pending in an array of %d slots, %d overflows; want 1 pending, at most 256 slots and none", pending, slots, sub.Overflows())
	}
}
