package discovery

import (
	"fmt"
	"slices"
	"testing"

	"github.com/meridian-mesh/meridian/internal/testutil"
	"github.com/meridian-mesh/meridian/proxy/internal/proxytest"
	"github.com/meridian-mesh/meridian/proxy/internal/replicatest"
	"github.com/meridian-mesh/meridian/shard"
)

const ringServices = 12

// ringSvc is service i of the ring tests: ns<i%3>/svc<i>, ports 80 and 81, and width ready
// endpoints starting at id v.
func ringSvc(i, v, width int) svc {
	s := svc{ns: fmt.Sprintf("ns%d", i%3), name: fmt.Sprintf("svc%d", i), ports: []int32{80, 81}}
	for id := v; id < v+width; id++ {
		s.ips = append(s.ips, fmt.Sprintf("10.%d.0.%d", i, id+1))
	}
	return s
}

func (s svc) authority(port int) string {
	return fmt.Sprintf("%s.%s.svc.cluster.local:%d", s.name, s.ns, port)
}

func (s svc) key() string { return s.ns + "/" + s.name }

// want is what a target of s at service port p holds: its ips at the target port.
func (s svc) want(p int) []string { return endpointsOf(p+8000, s.ips...) }

func ringCluster(t *testing.T, width int) *cluster {
	c := newCluster(t)
	for i := range ringServices {
		c.write(ringSvc(i, 0, width))
	}
	return c
}

// pickOwned returns the index of a service owned by a node other than those in not.
func pickOwned(t *testing.T, nodes []*node, not ...*node) int {
	t.Helper()
	for i := range ringServices {
		s := ringSvc(i, 0, 1)
		if o := replicatest.Owner(nodes, s.key()); !slices.Contains(not, o) {
			return i
		}
	}
	t.Fatalf("no service owned outside %d nodes", len(not))
	return -1
}

// In redirect mode the resolver ends up streaming from each service's owner, remembers the
// owner, and goes straight there for another target of the same service.
func TestRedirectFollowsOwners(t *testing.T) {
	c := ringCluster(t, 2)
	nodes := startRing(t, c, 3, shard.Redirect)
	r := newResolver(t, nodes[0].Addr, nil)
	redirects := func() float64 { return sumMetric(t, nodes, "destination_redirects_total", nil) }

	ia := pickOwned(t, nodes, nodes[0])
	a := ringSvc(ia, 0, 2)
	ownerA := replicatest.Owner(nodes, a.key())
	ha := resolve(t, r, a.authority(80))
	waitEndpoints(t, ha, a.want(80))
	if got := r.ownerOf(a.key()); got != ownerA.Addr {
		t.Fatalf("the resolver remembers %q as the owner of %s, want %s (%s)", got, a.key(), ownerA.Addr, ownerA.Name)
	}
	if p := ha.Snapshot().Profile; p.FullyQualifiedName != a.name+"."+a.ns+".svc.cluster.local" {
		t.Fatalf("profile %+v", p)
	}
	testutil.Eventually(t, within, "the owner to serve the Get stream", func() bool { return ownerA.GetStreams(t) == 1 })
	if n := redirects(); n < 2 {
		t.Fatalf("%v redirects, want at least 2 (Get and GetProfile)", n)
	}
	for _, n := range nodes {
		if n != ownerA && n.GetStreams(t) != 0 {
			t.Fatalf("%s, not the owner, serves a Get stream", n.Name)
		}
	}

	// Another port of the same service: straight to the owner, no redirect.
	before := redirects()
	ha81 := resolve(t, r, a.authority(81))
	waitEndpoints(t, ha81, a.want(81))
	testutil.Eventually(t, within, "the owner to serve both Get streams", func() bool { return ownerA.GetStreams(t) == 2 })
	if n := redirects(); n != before {
		t.Fatalf("%v redirects for a service whose owner is known, want none", n-before)
	}

	// A service owned elsewhere is followed too.
	ib := pickOwned(t, nodes, nodes[0], ownerA)
	if ib == ia {
		ib = pickOwned(t, nodes, nodes[0])
	}
	b := ringSvc(ib, 0, 2)
	ownerB := replicatest.Owner(nodes, b.key())
	hb := resolve(t, r, b.authority(80))
	waitEndpoints(t, hb, b.want(80))
	if got := r.ownerOf(b.key()); got != ownerB.Addr {
		t.Fatalf("the resolver remembers %q as the owner of %s, want %s", got, b.key(), ownerB.Addr)
	}
	if n := redirects(); n <= before {
		t.Fatal("a new service was not redirected")
	}

	// The streams at the owner keep following changes.
	a2 := ringSvc(ia, 5, 3)
	c.write(a2)
	waitEndpoints(t, ha, a2.want(80))
	waitEndpoints(t, ha81, a2.want(81))
}

// Killing the owner mid-stream: the snapshot keeps the last set while no stream is up; once
// the ring has settled the resolver re-resolves at the new owner, whose first Add replaces
// the set, without losing or duplicating an endpoint on the way.
func TestOwnerKilledReResolvesAtNewOwner(t *testing.T) {
	const width = 4
	c := ringCluster(t, width)
	nodes := startRing(t, c, 3, shard.Redirect)
	r := newResolver(t, nodes[0].Addr, nil)
	i := pickOwned(t, nodes, nodes[0])
	before := ringSvc(i, 0, width)
	killed := replicatest.Owner(nodes, before.key())
	h := resolve(t, r, before.authority(80))
	waitEndpoints(t, h, before.want(80))
	rec := record(t, h)

	killed.Kill()
	// The endpoints change while the owner is gone: the new owner serves the new set.
	after := ringSvc(i, 1, width)
	c.write(after)
	if got := addrs(h.Snapshot()); !slices.Equal(got, before.want(80)) && !slices.Equal(got, after.want(80)) {
		t.Fatalf("with the owner gone the target holds %v", got)
	}
	survivors := slices.DeleteFunc(slices.Clone(nodes), func(n *node) bool { return n == killed })
	replicatest.WaitRing(t, survivors)
	waitEndpoints(t, h, after.want(80))
	newOwner := replicatest.Owner(survivors, after.key())
	testutil.EventuallyNoError(t, within, "the resolver to stream from the new owner", func() error {
		if got := r.ownerOf(after.key()); got != newOwner.Addr && got != "" {
			return fmt.Errorf("remembered owner %s, want %s (or none: the destination forwards)", got, newOwner.Addr)
		}
		if n := newOwner.GetStreams(t); n != 1 {
			return fmt.Errorf("the new owner %s serves %v Get streams", newOwner.Name, n)
		}
		return nil
	})

	// Every state the target published was the old set, the new one, or a step of one delta
	// between them: never empty, never both sets at once, never an address twice.
	union := map[string]bool{}
	for _, a := range append(before.want(80), after.want(80)...) {
		union[a] = true
	}
	published := rec.upTo(t, h)
	t.Logf("owner %s killed, %s took over; published: %v", killed.Name, newOwner.Name, versions(published))
	for _, s := range published {
		got := addrs(s)
		if !s.Resolved || !s.Exists || len(got) < width-1 || len(got) > width || !slices.IsSorted(got) || len(slices.Compact(slices.Clone(got))) != len(got) {
			t.Fatalf("published state version %d: resolved %v, exists %v, %v", s.Version, s.Resolved, s.Exists, got)
		}
		for _, a := range got {
			if !union[a] {
				t.Fatalf("published state version %d holds %s, from neither set", s.Version, a)
			}
		}
	}
	// And the new stream keeps following changes.
	later := ringSvc(i, 7, 2)
	c.write(later)
	waitEndpoints(t, h, later.want(80))
}

// Against replicas in forward mode (no redirects) the resolver streams through the replica
// it is configured with, which relays to the owner.
func TestForwardModeNoRedirects(t *testing.T) {
	c := ringCluster(t, 2)
	nodes := startRing(t, c, 3, shard.Forward)
	r := newResolver(t, nodes[0].Addr, nil)
	i := pickOwned(t, nodes, nodes[0])
	s := ringSvc(i, 0, 2)
	h := resolve(t, r, s.authority(80))
	waitEndpoints(t, h, s.want(80))
	if n := sumMetric(t, nodes, "destination_redirects_total", nil); n != 0 {
		t.Fatalf("%v redirects in forward mode", n)
	}
	if got := r.ownerOf(s.key()); got != "" {
		t.Fatalf("an owner %q remembered without a redirect", got)
	}
	testutil.Eventually(t, within, "r0 to relay the streams", func() bool {
		return proxytest.Gathered(t, nodes[0].Reg, "destination_forwarded_streams", nil) == 2
	})
	s2 := ringSvc(i, 3, 3)
	c.write(s2)
	waitEndpoints(t, h, s2.want(80))
}
