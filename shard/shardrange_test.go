package shard

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/sharding"

	"github.com/meridian-mesh/meridian/ring"
)

// parsedSelector is a selector's ranges, [lo, hi) with hi 0 meaning 2^64.
type parsedSelector [][2]uint64

func parseSelector(t *testing.T, s string) parsedSelector {
	t.Helper()
	var out parsedSelector
	for _, term := range strings.Split(s, " || ") {
		body, ok := strings.CutPrefix(term, "shardRange(object.metadata.namespace, '0x")
		lo, hi, ok2 := strings.Cut(strings.TrimSuffix(body, "')"), "', '0x")
		if !ok || !ok2 {
			t.Fatalf("term %q is not a namespace shardRange", term)
		}
		l, err := strconv.ParseUint(lo, 16, 64)
		if err != nil {
			t.Fatalf("term %q: %v", term, err)
		}
		var h uint64
		if hi != "10000000000000000" {
			if h, err = strconv.ParseUint(hi, 16, 64); err != nil {
				t.Fatalf("term %q: %v", term, err)
			}
		}
		out = append(out, [2]uint64{l, h})
	}
	return out
}

func (p parsedSelector) matches(h uint64) bool {
	for _, r := range p {
		if h >= r[0] && (r[1] == 0 || h < r[1]) {
			return true
		}
	}
	return false
}

func TestNamespaceHashIsTheAPIServers(t *testing.T) {
	for _, ns := range []string{"", "default", "lb-0", "lb-9", "payments-production-with-a-long-name"} {
		if got, want := fmt.Sprintf("%016x", NamespaceHash(ns)), sharding.HashField(ns); got != want {
			t.Fatalf("NamespaceHash(%q) = %s, the API server's %s", ns, got, want)
		}
	}
	k := NewServiceKey("payments", "checkout")
	if a := testing.AllocsPerRun(100, func() { _ = ShardByNamespace.hash(k) }); a != 0 {
		t.Fatalf("the namespace hash allocates %.1f times", a)
	}
	if ShardByNamespace.hash(ipKey(netipMust("10.0.0.1:80").Addr())) != ipKey(netipMust("10.0.0.1:80").Addr()).Hash() {
		t.Fatal("an address's key is placed by the namespace hash")
	}
}

func TestPartitionStart(t *testing.T) {
	for _, n := range []int{1, 3, 4096, 1000} {
		r := ring.Build([]ring.Member{{Name: "a"}}, ring.HashConfig{Partitions: n, VirtualNodes: 1, LoadFactor: 1.25})
		for _, p := range []int{0, 1, n / 2, n - 1} {
			if p >= n {
				continue
			}
			lo, top := partitionStart(p, n)
			if top || r.PartitionOfHash(lo) != p || (p > 0 && r.PartitionOfHash(lo-1) != p-1) {
				t.Fatalf("n=%d: partition %d starts at %#x (partition %d)", n, p, lo, r.PartitionOfHash(lo))
			}
		}
		if _, top := partitionStart(n, n); !top {
			t.Fatalf("n=%d: the end is not 2^64", n)
		}
	}
}

// TestShardSelector: the selector of a member's share matches every namespace it owns in a
// ring keyed by namespace (a superset when coarsened), the shares' selectors cover every
// namespace, and they are few enough ranges for the API server.
func TestShardSelector(t *testing.T) {
	var ms []ring.Member
	for i := range 4 {
		ms = append(ms, ring.Member{Name: fmt.Sprintf("r%d", i)})
	}
	shape := ShardByNamespace.RingShape()
	r := ring.Build(ms, shape)
	sels := map[string]parsedSelector{}
	for _, m := range ms {
		s := ownedSelector(r, m.Name)
		if n := strings.Count(s, "shardRange"); n == 0 || n > maxShardRanges {
			t.Fatalf("%s: %d ranges", m.Name, n)
		}
		sels[m.Name] = parseSelector(t, s)
	}
	owned := map[string]int{}
	for i := range 2000 {
		ns := fmt.Sprintf("tenant-%d", i)
		h := NamespaceHash(ns)
		owner := r.OwnerOfHash(h).Name
		owned[owner]++
		if !sels[owner].matches(h) {
			t.Fatalf("%s owns %s (%#x) but its selector does not match it", owner, ns, h)
		}
	}
	t.Logf("2000 namespaces tenant-N over 4 replicas: %v", owned)
	if got := ownedSelector(ring.Build(ms[:1], shape), "r0"); got != "" {
		t.Fatalf("the only member's selector is %q, want none", got)
	}
	if got := parseSelector(t, ownedSelector(r, "nobody")); got.matches(NamespaceHash("tenant-1")) {
		t.Fatal("a member owning nothing selects namespaces")
	}
	// What r0 gains when r3 leaves, and only that.
	r3 := ring.Build(ms[:3], shape)
	g := gainedSelector(r, r3, "r0")
	exact := coarsen(partitionRuns(r3, func(p int) bool { return r3.PartitionOwner(p).Name == "r0" && r.PartitionOwner(p).Name != "r0" }), 1<<20)
	sel := parseSelector(t, g)
	for _, run := range exact {
		lo, _ := partitionStart(run[0], r3.Partitions())
		if !sel.matches(lo) {
			t.Fatalf("the gained selector misses partition %d", run[0])
		}
	}
}

// TestShardSelectorPrecision: in the namespace key's ring shape, a replica's selector asks
// the API server for its own namespaces and hardly any other, at 2 to 16 replicas. With
// partitions scattered (ring.DefaultHashConfig) the selector of at most 64 ranges widens
// to most of the cluster: logged for comparison.
func TestShardSelectorPrecision(t *testing.T) {
	const namespaces = 5000
	hashes := make([]uint64, namespaces)
	for i := range hashes {
		hashes[i] = NamespaceHash(fmt.Sprintf("tenant-%d", i))
	}
	// asked returns how many namespaces the members' selectors select, in all, over
	// namespaces: 1 when each asks for exactly its own.
	asked := func(r *ring.Ring) float64 {
		total := 0
		for _, m := range r.Members() {
			sel := parseSelector(t, ownedSelector(r, m.Name))
			for _, h := range hashes {
				if sel.matches(h) {
					total++
				}
			}
		}
		return float64(total) / namespaces
	}
	for _, n := range []int{2, 4, 8, 16} {
		var ms []ring.Member
		for i := range n {
			ms = append(ms, ring.Member{Name: fmt.Sprintf("meridian-destination-%x", 0x5eed+i*7919)})
		}
		got := asked(ring.Build(ms, ShardByNamespace.RingShape()))
		t.Logf("%d replicas: their selectors ask for %.2f times the namespaces (%.2f with scattered partitions)", n, got, asked(ring.Build(ms, ring.DefaultHashConfig())))
		if got > 1.01 {
			t.Errorf("%d replicas: their selectors ask for %.2f times the namespaces, want at most 1.01", n, got)
		}
	}
}

func TestCoarsen(t *testing.T) {
	runs := [][2]int{{0, 1}, {3, 4}, {5, 6}, {10, 12}}
	got := coarsen(runs, 2)
	if fmt.Sprint(got) != "[[0 6] [10 12]]" {
		t.Fatalf("coarsen = %v", got)
	}
}
