package ring

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// testKeys returns n service keys shaped like real ones ("namespace/name").
func testKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("ns-%d/svc-%d", i%97, i)
	}
	return keys
}

func testMembers(n int) []Member {
	ms := make([]Member, n)
	for i := range ms {
		ms[i] = Member{Name: fmt.Sprintf("destination-%d", i), Addr: fmt.Sprintf("10.0.0.%d:8086", i+1)}
	}
	return ms
}

func TestShareSpread(t *testing.T) {
	keys := testKeys(10000)
	for n := 1; n <= 8; n++ {
		r := Build(testMembers(n), DefaultHashConfig())
		shares := r.Shares(keys)
		if len(shares) != n {
			t.Fatalf("N=%d: shares has %d members", n, len(shares))
		}
		fair := float64(len(keys)) / float64(n)
		maxShare, minShare, total := 0, len(keys), 0
		maxParts := 0
		for name, s := range shares {
			total += s
			maxShare = max(maxShare, s)
			minShare = min(minShare, s)
			maxParts = max(maxParts, r.OwnedPartitions(name))
		}
		if total != len(keys) {
			t.Fatalf("N=%d: shares sum to %d, want %d", n, total, len(keys))
		}
		ratio := float64(maxShare) / fair
		pratio := float64(maxParts) / (float64(r.Partitions()) / float64(n))
		t.Logf("N=%d: keys max/fair=%.3f min/fair=%.3f; partitions max/fair=%.3f",
			n, ratio, float64(minShare)/fair, pratio)
		if ratio > 1.25 {
			t.Errorf("N=%d: largest share %d is %.3f x fair share %.0f, want <= 1.25", n, maxShare, ratio, fair)
		}
		if lf := r.Config().LoadFactor; pratio > lf+float64(n)/float64(r.Partitions()) {
			t.Errorf("N=%d: largest partition count %d is %.3f x fair, want <= %v", n, maxParts, pratio, lf)
		}
	}
}

// moved returns the fraction of keys whose owner differs between a and b.
func moved(a, b *Ring, keys []string) float64 {
	n := 0
	for _, k := range keys {
		if a.Owner(k).Name != b.Owner(k).Name {
			n++
		}
	}
	return float64(n) / float64(len(keys))
}

func TestMovement(t *testing.T) {
	keys := testKeys(10000)
	cfg := DefaultHashConfig()
	for _, tc := range []struct {
		name     string
		from, to int
	}{
		{"join 3->4", 3, 4},
		{"leave 4->3", 4, 3},
		{"join 1->2", 1, 2},
		{"join 4->5", 4, 5},
		{"leave 8->7", 8, 7},
		{"join 32->33 (load bound active)", 32, 33},
		{"leave 64->63 (load bound active)", 64, 63},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := Build(testMembers(tc.from), cfg)
			b := Build(testMembers(tc.to), cfg)
			// The ideal is 1/N of the keys (N the larger ring); the exact floor is the
			// share of the member that joins or leaves (the last one by name here).
			ideal := 1 / float64(max(tc.from, tc.to))
			changed := testMembers(max(tc.from, tc.to))[max(tc.from, tc.to)-1].Name
			floor := float64(max(a.Shares(keys)[changed], b.Shares(keys)[changed])) / float64(len(keys))
			got := moved(a, b, keys)
			t.Logf("%s: moved %.4f of keys; 1/N %.4f (ratio %.2f); floor (share of %s) %.4f (ratio %.2f)",
				tc.name, got, ideal, got/ideal, changed, floor, got/floor)
			if got > 1.5*ideal {
				t.Errorf("moved %.4f of keys, want <= 1.5 x 1/N = %.4f", got, 1.5*ideal)
			}
			if got < floor {
				t.Errorf("moved %.4f of keys, less than the floor %.4f: the measure is wrong", got, floor)
			}
			// Every key still has an owner that is a member of the new ring. (Bounded load
			// may spill a few keys between members that stay, so moves are not only to the
			// joining or from the leaving member.)
			for _, k := range keys {
				if _, ok := b.Member(b.Owner(k).Name); !ok {
					t.Fatalf("key %q owned by %q, not a member", k, b.Owner(k).Name)
				}
			}
		})
	}
}

// TestLeaveMiddle removes a member that is not the last by name, to be sure the measure
// does not depend on which member goes.
func TestLeaveMiddle(t *testing.T) {
	keys := testKeys(10000)
	all := testMembers(4)
	a := Build(all, DefaultHashConfig())
	for drop := range all {
		rest := append(append([]Member{}, all[:drop]...), all[drop+1:]...)
		b := Build(rest, DefaultHashConfig())
		got := moved(a, b, keys)
		floor := float64(a.Shares(keys)[all[drop].Name]) / float64(len(keys))
		t.Logf("4->3 dropping %s: moved %.4f (1/N 0.25, floor %.4f, ratio to floor %.2f)", all[drop].Name, got, floor, got/floor)
		if got > 1.5*0.25 {
			t.Errorf("dropping %s moved %.4f, want <= %.4f", all[drop].Name, got, 1.5*0.25)
		}
	}
}

func TestDeterminism(t *testing.T) {
	keys := testKeys(2000)
	ms := testMembers(5)
	ref := Build(ms, DefaultHashConfig())
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 20; i++ {
		shuffled := append([]Member{}, ms...)
		rng.Shuffle(len(shuffled), func(a, b int) { shuffled[a], shuffled[b] = shuffled[b], shuffled[a] })
		// Duplicates and nameless entries must not matter either.
		shuffled = append(shuffled, Member{Addr: "1.2.3.4:1"}, ms[rng.IntN(len(ms))])
		r := Build(shuffled, DefaultHashConfig())
		if r.ID() != ref.ID() || !r.Equal(ref) {
			t.Fatalf("shuffle %d: ID %x, want %x", i, r.ID(), ref.ID())
		}
		for _, k := range keys {
			if r.Owner(k) != ref.Owner(k) {
				t.Fatalf("shuffle %d: owner of %q is %v, want %v", i, k, r.Owner(k), ref.Owner(k))
			}
		}
	}
	// A fixed expectation pins the assignment across versions of this package: every
	// replica must compute the same owners, including replicas built from older code.
	if got := ref.Owner("default/kubernetes").Name; got != pinnedOwner {
		t.Errorf("owner of default/kubernetes = %q, want %q (did the assignment change?)", got, pinnedOwner)
	}
}

// pinnedOwner is the owner of "default/kubernetes" in Build(testMembers(5), DefaultHashConfig()).
const pinnedOwner = "destination-3"

func TestEmptyAndSingle(t *testing.T) {
	var zero Ring
	if m := zero.Owner("a/b"); m != (Member{}) {
		t.Errorf("zero ring owner = %v", m)
	}
	if zero.Owns("a/b", "") {
		t.Errorf("zero ring owns for empty self")
	}
	empty := Build(nil, DefaultHashConfig())
	if m := empty.Owner("a/b"); m != (Member{}) || empty.Len() != 0 {
		t.Errorf("empty ring owner = %v, len %d", m, empty.Len())
	}
	if s := empty.Shares([]string{"a/b"}); len(s) != 0 {
		t.Errorf("empty ring shares = %v", s)
	}
	one := Build([]Member{{Name: "a", Addr: "x:1"}}, DefaultHashConfig())
	for _, k := range testKeys(100) {
		if !one.Owns(k, "a") || one.Owns(k, "b") {
			t.Fatalf("single ring: Owns(%q) wrong", k)
		}
	}
	if one.PartitionOwner(-1) != (Member{}) || one.PartitionOwner(one.Partitions()) != (Member{}) {
		t.Errorf("out-of-range partition has an owner")
	}
}

func TestHashConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		cfg HashConfig
		ok  bool
	}{
		{DefaultHashConfig(), true},
		{HashConfig{Partitions: 1, VirtualNodes: 1, LoadFactor: 1}, true},
		{HashConfig{Partitions: 0, VirtualNodes: 1, LoadFactor: 1}, false},
		{HashConfig{Partitions: 10, VirtualNodes: 0, LoadFactor: 1}, false},
		{HashConfig{Partitions: 10, VirtualNodes: 1, LoadFactor: 0.5}, false},
		{HashConfig{Partitions: MaxPartitions + 1, VirtualNodes: 1, LoadFactor: 1}, false},
	} {
		if err := tc.cfg.Validate(); (err == nil) != tc.ok {
			t.Errorf("Validate(%+v) = %v, want ok=%v", tc.cfg, err, tc.ok)
		}
	}
	// An invalid config falls back to the default shape.
	r := Build(testMembers(2), HashConfig{})
	if r.Config() != DefaultHashConfig() {
		t.Errorf("Build with invalid config used %+v", r.Config())
	}
}

// TestTightLoadFactor checks the bound holds exactly with LoadFactor 1: perfectly even
// partition counts.
func TestTightLoadFactor(t *testing.T) {
	cfg := HashConfig{Partitions: 1000, VirtualNodes: 64, LoadFactor: 1}
	r := Build(testMembers(7), cfg)
	total := 0
	for _, m := range r.Members() {
		c := r.OwnedPartitions(m.Name)
		total += c
		if c > 143 { // ceil(1000/7)
			t.Errorf("%s owns %d partitions, want <= 143", m.Name, c)
		}
	}
	if total != 1000 {
		t.Errorf("partitions sum to %d", total)
	}
}

func BenchmarkOwner(b *testing.B) {
	r := Build(testMembers(8), DefaultHashConfig())
	keys := testKeys(1024)
	b.ReportAllocs()
	b.ResetTimer()
	var sink Member
	for i := 0; i < b.N; i++ {
		sink = r.Owner(keys[i&1023])
	}
	_ = sink
}

// BenchmarkOwns looks keys up by their string (key) and, for a caller that keeps each key's
// hash, by that (hash).
func BenchmarkOwns(b *testing.B) {
	r := Build(testMembers(8), DefaultHashConfig())
	keys := testKeys(1024)
	hashes := make([]uint64, len(keys))
	for i, k := range keys {
		hashes[i] = KeyHash(k)
	}
	for name, owns := range map[string]func(i int) bool{
		"key":  func(i int) bool { return r.Owns(keys[i], "destination-3") },
		"hash": func(i int) bool { return r.OwnsHash(hashes[i], "destination-3") },
	} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			n := 0
			for i := 0; i < b.N; i++ {
				if owns(i & 1023) {
					n++
				}
			}
			_ = n
		})
	}
}

func BenchmarkServiceHash(b *testing.B) {
	b.ReportAllocs()
	var sink uint64
	for i := 0; i < b.N; i++ {
		sink += ServiceHash("payments-production", "checkout-service-canary")
	}
	_ = sink
}

func BenchmarkBuild(b *testing.B) {
	for _, n := range []int{3, 16} {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			ms := testMembers(n)
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				Build(ms, DefaultHashConfig())
			}
		})
	}
}

func TestOwnerAllocs(t *testing.T) {
	r := Build(testMembers(4), DefaultHashConfig())
	key := "default/web"
	if a := testing.AllocsPerRun(100, func() { _ = r.Owner(key); _ = r.Owns(key, "x") }); a != 0 {
		t.Errorf("Owner/Owns allocate %.1f times per call, want 0", a)
	}
	ns, name := "payments-production-with-a-long-name", "checkout-service-canary-with-a-long-name"
	if a := testing.AllocsPerRun(100, func() {
		h := ServiceHash(ns, name)
		_ = r.OwnerOfHash(h)
		_ = r.OwnsHash(h, "x")
	}); a != 0 {
		t.Errorf("ServiceHash/OwnerOfHash/OwnsHash allocate %.1f times per call, want 0", a)
	}
}

// TestHashLookupsAgree: the lookups by hash give what the lookups by string give, and
// ServiceHash is the hash of "namespace/name", for keys short and long (the hash's block
// size is 32 bytes), empty parts, slashes inside a part and bytes that are not UTF-8.
func TestHashLookupsAgree(t *testing.T) {
	parts := [][2]string{
		{"default", "web"}, {"", ""}, {"", "web"}, {"default", ""}, {"a/b", "c"}, {"a", "b/c"},
		{"\xff\xfe", "\x00"}, {strings.Repeat("n", 31), "s"}, {strings.Repeat("n", 32), strings.Repeat("s", 32)},
		{"payments-production", "checkout-service-canary-v2"}, {strings.Repeat("x", 253), strings.Repeat("y", 63)},
	}
	for i := range 500 {
		parts = append(parts, [2]string{fmt.Sprintf("ns-%d", i%97), fmt.Sprintf("svc-%d", i)})
	}
	for _, n := range []int{0, 1, 5} {
		r := Build(testMembers(n), DefaultHashConfig())
		for _, p := range parts {
			key := p[0] + "/" + p[1]
			h := ServiceHash(p[0], p[1])
			if h != KeyHash(key) {
				t.Fatalf("ServiceHash(%q, %q) = %x, KeyHash(%q) = %x", p[0], p[1], h, key, KeyHash(key))
			}
			if got, want := r.OwnerOfHash(h), r.Owner(key); got != want {
				t.Fatalf("N=%d: OwnerOfHash(%q) = %v, Owner = %v", n, key, got, want)
			}
			if got, want := r.PartitionOfHash(h), r.Partition(key); got != want {
				t.Fatalf("N=%d: PartitionOfHash(%q) = %d, Partition = %d", n, key, got, want)
			}
			for _, m := range append(testMembers(n), Member{Name: "absent"}) {
				if got, want := r.OwnsHash(h, m.Name), r.Owns(key, m.Name); got != want {
					t.Fatalf("N=%d: OwnsHash(%q, %s) = %v, Owns = %v", n, key, m.Name, got, want)
				}
			}
		}
	}
}

func TestStatus(t *testing.T) {
	r := Build(testMembers(3), DefaultHashConfig())
	s := r.Status()
	if s.ID != fmt.Sprintf("%016x", r.ID()) || s.Partitions != r.Partitions() || len(s.Members) != 3 {
		t.Fatalf("Status = %+v", s)
	}
	total, share := 0, 0.0
	for i, m := range s.Members {
		if m.Name != testMembers(3)[i].Name || m.Addr != testMembers(3)[i].Addr {
			t.Errorf("member %d = %+v", i, m)
		}
		total += m.Partitions
		share += m.Share
	}
	if total != r.Partitions() || share < 0.999 || share > 1.001 {
		t.Errorf("partitions sum %d, shares sum %v", total, share)
	}
	var zero Ring
	if s := zero.Status(); len(s.Members) != 0 {
		t.Errorf("zero ring status %+v", s)
	}
}

// TestPartitionBoundLargeRings checks the bounded-load rule where it binds more often:
// larger rings. Partition counts never exceed ceil(1.25*P/N).
func TestPartitionBoundLargeRings(t *testing.T) {
	cfg := DefaultHashConfig()
	for _, n := range []int{16, 32, 64, 200} {
		r := Build(testMembers(n), cfg)
		limit := (5*cfg.Partitions + 4*n - 1) / (4 * n) // ceil(1.25*P/N)
		maxParts, total := 0, 0
		for _, m := range r.Members() {
			c := r.OwnedPartitions(m.Name)
			maxParts = max(maxParts, c)
			total += c
		}
		t.Logf("N=%d: partitions max/fair=%.3f (limit %d, max %d)", n, float64(maxParts)*float64(n)/float64(cfg.Partitions), limit, maxParts)
		if maxParts > limit || total != cfg.Partitions {
			t.Errorf("N=%d: max %d partitions (limit %d), total %d", n, maxParts, limit, total)
		}
	}
}
