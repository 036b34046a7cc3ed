package shard

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meridian-mesh/meridian/ring"
)

// staticMembership is a ring that never changes, for tests of lookups.
type staticMembership struct {
	r    *ring.Ring
	self ring.Member
}

func (s staticMembership) Ring() *ring.Ring  { return s.r }
func (s staticMembership) Self() ring.Member { return s.self }
func (s staticMembership) Subscribe() (<-chan struct{}, func()) {
	return make(chan struct{}), func() {}
}
func (s staticMembership) Joined() bool  { return true }
func (s staticMembership) Settled() bool { return true }

func benchRing() (*ring.Ring, []ring.Member) {
	var ms []ring.Member
	for i := range 8 {
		ms = append(ms, ring.Member{Name: fmt.Sprintf("destination-%d", i), Addr: fmt.Sprintf("10.0.0.%d:8086", i+1)})
	}
	return ring.Build(ms, ring.DefaultHashConfig()), ms
}

// benchKeys are keys shaped like real ones: short ("ns-1/svc-1", which Go could concatenate
// on the stack) and long (over 32 bytes, which it cannot).
var benchKeys = []struct{ name, ns, svc string }{
	{"short", "ns-%d", "svc-%d"},
	{"long", "payments-production-%d", "checkout-service-canary-%d"},
}

func keysOf(nsf, svcf string) []ServiceKey {
	keys := make([]ServiceKey, 1024)
	for i := range keys {
		keys[i] = NewServiceKey(fmt.Sprintf(nsf, i%97), fmt.Sprintf(svcf, i))
	}
	return keys
}

// BenchmarkOwns is the index's ownership check, made for every slice and every stream event.
func BenchmarkOwns(b *testing.B) {
	r, ms := benchRing()
	rep, err := NewReplica(DefaultConfig(), Deps{Source: newPushSource(), Membership: staticMembership{r, ms[3]}})
	if err != nil {
		b.Fatal(err)
	}
	benchLookup(b, rep.Index().Owns)
}

// BenchmarkOwner is the streams' lookup of a service's owner in the current ring view.
func BenchmarkOwner(b *testing.B) {
	r, ms := benchRing()
	own := newOwnership(ms[3].Name, ShardByService, r)
	benchLookup(b, func(k ServiceKey) bool { _, local := own.load().owner(k); return local })
}

func benchLookup(b *testing.B, owns func(ServiceKey) bool) {
	for _, c := range benchKeys {
		keys := keysOf(c.ns, c.svc)
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			n := 0
			for i := 0; i < b.N; i++ {
				if owns(keys[i&1023]) {
					n++
				}
			}
			_ = n
		})
	}
}

// TestOwnershipAgreesWithRing: the index filter and the streams' view, which look services
// up by their key's hash, agree with the ring's lookup by "namespace/name", and neither
// allocates.
func TestOwnershipAgreesWithRing(t *testing.T) {
	r, ms := benchRing()
	self := ms[3].Name
	owns := ownsFunc(r, self, ShardByService)
	own := newOwnership(self, ShardByService, r)
	for _, c := range benchKeys {
		for _, k := range keysOf(c.ns, c.svc) {
			want := r.Owner(k.String())
			if got := owns(k); got != (want.Name == self) {
				t.Fatalf("%s: index filter says %v, ring owner %s", k, got, want.Name)
			}
			if got, local := own.load().owner(k); got != want || local != (want.Name == self) {
				t.Fatalf("%s: view says %v (local %v), ring owner %v", k, got, local, want)
			}
		}
	}
	k := NewServiceKey("payments-production-with-a-long-name", "checkout-service-canary-with-a-long-name")
	if a := testing.AllocsPerRun(100, func() { _ = owns(k); _, _ = own.load().owner(k) }); a != 0 {
		t.Fatalf("ownership lookups allocate %.1f times per call, want 0", a)
	}
	// Without a ring, a replica owns everything.
	if _, local := newOwnership(standaloneName, ShardByService, nil).load().owner(k); !local {
		t.Fatal("a replica without a ring must serve every service itself")
	}
}

// TestMoveWatch: ownership cancels a watched relayed call when a ring change gives its
// service to another member or to this one, or when the replica stops, and leaves it alone
// otherwise; a call watched from a view the ring has since left is checked at once, one
// watched after the stop is cancelled at once, and an unwatched one is never cancelled.
func TestMoveWatch(t *testing.T) {
	r, ms := benchRing()
	self := ms[0]
	own := newOwnership(self.Name, ShardByService, r)
	keys := keysOf("ns-%d", "svc-%d")
	ownerIn := func(r *ring.Ring, k ServiceKey) string { return r.OwnerOfHash(ShardByService.hash(k)).Addr }
	var causes []error
	var watched []*moveWatch
	watch := func(k ServiceKey, owner string, v *ringView) *moveWatch {
		i := len(causes)
		causes = append(causes, nil)
		w := &moveWatch{k: k, owner: owner, cancel: func(err error) {
			if causes[i] != nil {
				t.Errorf("watch %d cancelled twice: %v, then %v", i, causes[i], err)
			}
			causes[i] = err
		}}
		own.watch(w, v)
		watched = append(watched, w)
		return w
	}
	// A relayed call for each key this replica does not own, to its owner in r.
	v0 := own.load()
	var relayed []ServiceKey
	for _, k := range keys {
		if a := ownerIn(r, k); a != self.Addr {
			relayed = append(relayed, k)
			watch(k, a, v0)
		}
	}
	unwatched := watch(relayed[0], ownerIn(r, relayed[0]), v0)
	own.unwatch(unwatched)

	// Member 7 leaves: its keys move (to this replica or another); the others stay put.
	r2 := ring.Build(ms[:7], ring.DefaultHashConfig())
	own.swap(r2)
	moved := 0
	for i, k := range relayed {
		wantMoved := ownerIn(r2, k) != ownerIn(r, k)
		if got := causes[i]; wantMoved != (got != nil) || (got != nil && got != errMoved) {
			t.Fatalf("%v (owner %s, then %s): cancelled with %v", k, ownerIn(r, k), ownerIn(r2, k), got)
		}
		if wantMoved {
			moved++
		}
	}
	if moved == 0 || moved == len(relayed) {
		t.Fatalf("%d of %d relayed keys moved: the test needs some of each", moved, len(relayed))
	}
	if causes[len(relayed)] != nil {
		t.Fatalf("an unwatched call was cancelled: %v", causes[len(relayed)])
	}

	// A call whose owner was found in v0, watched after the swap: checked against r2 at once.
	var stale, kept ServiceKey
	for _, k := range relayed {
		if ownerIn(r2, k) != ownerIn(r, k) {
			stale = k
		} else {
			kept = k
		}
	}
	n := len(causes)
	watch(stale, ownerIn(r, stale), v0)
	watch(kept, ownerIn(r, kept), v0)
	if causes[n] != errMoved || causes[n+1] != nil {
		t.Fatalf("watched from a stale view: moved key cancelled with %v, kept key with %v", causes[n], causes[n+1])
	}
	// Each relayed call unwatches when it ends, whether or not it was cancelled already:
	// one that swap cancelled, and one cancelled at once.
	for i := range relayed {
		if causes[i] == errMoved {
			own.unwatch(watched[i])
			break
		}
	}
	own.unwatch(watched[n])

	// The replica stops: every call still watched ends with errStopping, and so does one
	// watched afterwards.
	own.stop()
	for i, k := range relayed {
		if want := map[bool]error{true: errMoved, false: errStopping}[ownerIn(r2, k) != ownerIn(r, k)]; causes[i] != want {
			t.Fatalf("%v after stop: cancelled with %v, want %v", k, causes[i], want)
		}
	}
	if causes[n+1] != errStopping || causes[len(relayed)] != nil {
		t.Fatalf("after stop: the call watched from a stale view ended with %v, the unwatched one with %v", causes[n+1], causes[len(relayed)])
	}
	watch(kept, ownerIn(r2, kept), own.load())
	if got := causes[len(causes)-1]; got != errStopping {
		t.Fatalf("watched after stop: %v", got)
	}
	if len(own.watching) != 0 {
		t.Fatal("calls left watched after stop")
	}
}

// TestMoveWatchConcurrent: relayed calls start and end while the ring changes; none is
// cancelled twice or after it ended, and the list is empty once they have all ended.
func TestMoveWatchConcurrent(t *testing.T) {
	r, ms := benchRing()
	own := newOwnership(ms[0].Name, ShardByService, r)
	keys := keysOf("ns-%d", "svc-%d")
	rings := []*ring.Ring{r, ring.Build(ms[:7], ring.DefaultHashConfig()), ring.Build(ms[1:], ring.DefaultHashConfig())}
	var wg sync.WaitGroup
	var bad atomic.Int64
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 500 {
				k := keys[(g*500+i)%len(keys)]
				v := own.load()
				m, local := v.owner(k)
				if local {
					continue
				}
				var mu sync.Mutex
				cancelled, ended := 0, false
				w := &moveWatch{k: k, owner: m.Addr, cancel: func(error) {
					mu.Lock()
					defer mu.Unlock()
					if cancelled++; cancelled > 1 || ended {
						bad.Add(1)
					}
				}}
				own.watch(w, v)
				own.unwatch(w)
				mu.Lock()
				ended = true
				mu.Unlock()
			}
		}()
	}
	for i := range 200 {
		own.swap(rings[i%len(rings)])
	}
	wg.Wait()
	if n := bad.Load(); n > 0 {
		t.Fatalf("%d relayed calls cancelled twice or after they ended", n)
	}
	if len(own.watching) != 0 {
		t.Fatal("calls left watched after every one ended")
	}
}

// TestRunStopsRelayedCalls: when a replica's Run returns, its relayed calls in flight end
// with errStopping (so their clients reconnect elsewhere), and so does one started after.
func TestRunStopsRelayedCalls(t *testing.T) {
	r, err := NewReplica(DefaultConfig(), Deps{Source: newPushSource()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	causes := make([]error, 2)
	watch := func(i int) {
		r.own.watch(&moveWatch{k: NewServiceKey("shop", "web"), owner: "127.0.0.1:1", cancel: func(err error) { causes[i] = err }}, r.own.load())
	}
	watch(0)
	cancel()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return within 30s of its context ending")
	}
	watch(1)
	if causes[0] != errStopping || causes[1] != errStopping {
		t.Fatalf("relayed calls ended with %v (in flight) and %v (started after Run returned), want errStopping", causes[0], causes[1])
	}
}
