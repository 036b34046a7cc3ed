package shard

import (
	"fmt"
	"testing"

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
func (s staticMembership) Joined() bool { return true }

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
