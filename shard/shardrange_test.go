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
	r := ring.Build(ms, ring.DefaultHashConfig())
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
	if got := ownedSelector(ring.Build(ms[:1], ring.DefaultHashConfig()), "r0"); got != "" {
		t.Fatalf("the only member's selector is %q, want none", got)
	}
	if got := parseSelector(t, ownedSelector(r, "nobody")); got.matches(NamespaceHash("tenant-1")) {
		t.Fatal("a member owning nothing selects namespaces")
	}
	// What r0 gains when r3 leaves, and only that.
	r3 := ring.Build(ms[:3], ring.DefaultHashConfig())
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

func TestCoarsen(t *testing.T) {
	runs := [][2]int{{0, 1}, {3, 4}, {5, 6}, {10, 12}}
	got := coarsen(runs, 2)
	if fmt.Sprint(got) != "[[0 6] [10 12]]" {
		t.Fatalf("coarsen = %v", got)
	}
}
