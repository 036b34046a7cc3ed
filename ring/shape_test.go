package ring

import (
	"encoding/binary"
	"fmt"
	"math"
	"testing"

	"github.com/cespare/xxhash/v2"

	"github.com/meridian-mesh/meridian/internal/testutil"
)

// ownersDigest hashes r's whole partition table.
func ownersDigest(r *Ring) uint64 {
	d := xxhash.New()
	var b [4]byte
	for _, o := range r.owner {
		binary.LittleEndian.PutUint32(b[:], o)
		_, _ = d.Write(b[:])
	}
	return d.Sum64()
}

// TestShapesPinned pins each shape's assignment across versions of this package: every
// replica of a ring must compute the same owners. The legacy shape's values were taken
// from the code before shapes were advertised (its DefaultHashConfig, at f1169ca): a
// member of this version in a ring with members of that one builds the very same rings.
// The other two were taken when they were introduced.
func TestShapesPinned(t *testing.T) {
	for _, tc := range []struct {
		shape  HashConfig
		n      int
		id, tb uint64 // the ring's ID and ownersDigest
	}{
		{LegacyHashConfig(), 3, 0x0f44ec7f33d87393, 0xcb245ccc4b456a62},
		{LegacyHashConfig(), 5, 0x02670e9913550803, 0x14c9b1eb7e59b4e2},
		{LegacyHashConfig(), 8, 0x2d9d4b58efc5b580, 0xf079b4e2c5aa23b8},
		{DefaultHashConfig(), 3, 0x24fcc67a025bcff7, 0x7fb5255e9b69dbaf},
		{DefaultHashConfig(), 5, 0x55971bde91ba9ef2, 0x32e38d0026216464},
		{RangeHashConfig(), 3, 0xe81cee191a41be45, 0x2fac3ce212312215},
		{RangeHashConfig(), 5, 0xa16766afbb17579d, 0xfbc198ab9975e346},
	} {
		r := Build(testMembers(tc.n), tc.shape)
		if got, tb := r.ID(), ownersDigest(r); got != tc.id || tb != tc.tb {
			t.Errorf("%s, %d members: ID %016x, owners %016x; want %016x, %016x (did the assignment change?)",
				tc.shape, tc.n, got, tb, tc.id, tc.tb)
		}
	}
}

// runsOf counts the runs of consecutive partitions that member i owns in r.
func runsOf(r *Ring, i uint32) int {
	runs := 0
	for p, o := range r.owner {
		if o == i && (p == 0 || r.owner[p-1] != i) {
			runs++
		}
	}
	return runs
}

// TestShapes checks what each shape promises, over rings of 2 to 32 members with names
// like a Deployment's pods': no member owns more than ceil(LoadFactor*P/N) partitions; a
// join or a leave moves at most the given multiple of the minimal share; and in the range
// shape a member's share is at most about VirtualNodes runs of partitions (a shard selector
// of at most 64 ranges covers it exactly).
func TestShapes(t *testing.T) {
	type bound struct {
		n     int
		moved float64 // a join's or a leave's moved partitions / the minimal (1/(N+1) or 1/N)
	}
	for _, tc := range []struct {
		shape   HashConfig
		bounds  []bound
		maxRuns int // 0: not checked
	}{
		{LegacyHashConfig(), []bound{{2, 1.15}, {4, 1.15}, {8, 1.15}, {16, 1.15}, {32, 1.2}}, 0},
		{DefaultHashConfig(), []bound{{2, 1.15}, {4, 1.15}, {8, 1.25}, {16, 1.35}, {32, 1.5}}, 0},
		{RangeHashConfig(), []bound{{2, 1.2}, {4, 1.3}, {8, 1.35}, {16, 1.45}, {32, 1.6}}, 72},
	} {
		for _, b := range tc.bounds {
			var worstRatio, joined, left float64
			maxRuns := 0
			const trials = 5
			for trial := range trials {
				ms := make([]Member, b.n+1)
				for i := range ms {
					ms[i] = Member{Name: fmt.Sprintf("meridian-destination-%x-%d", xxhash.Sum64String(fmt.Sprint(trial, i))&0xffffff, i), Addr: "10.0.0.1:8086"}
				}
				r := Build(ms[:b.n], tc.shape)
				capacity := int(math.Ceil(tc.shape.LoadFactor * float64(tc.shape.Partitions) / float64(b.n)))
				for i, c := range r.counts {
					if c > capacity {
						t.Errorf("%s, %d members: %s owns %d partitions, over %d", tc.shape, b.n, r.members[i].Name, c, capacity)
					}
					worstRatio = max(worstRatio, float64(c)*float64(b.n)/float64(tc.shape.Partitions))
					maxRuns = max(maxRuns, runsOf(r, uint32(i)))
				}
				joined += movedPartitions(r, Build(ms, tc.shape)) * float64(b.n+1)
				left += movedPartitions(r, Build(ms[1:b.n], tc.shape)) * float64(b.n)
			}
			joined, left = joined/trials, left/trials
			t.Logf("%s, %d members: largest share %.3f x fair; a join moves %.2f x the minimum, a leave %.2f x; at most %d runs a member",
				tc.shape, b.n, worstRatio, joined, left, maxRuns)
			if joined > b.moved || left > b.moved {
				t.Errorf("%s, %d members: a join moves %.2f x the minimum and a leave %.2f x, want at most %.2f", tc.shape, b.n, joined, left, b.moved)
			}
			if tc.maxRuns > 0 && maxRuns > tc.maxRuns {
				t.Errorf("%s, %d members: a member owns %d runs of partitions, want at most %d", tc.shape, b.n, maxRuns, tc.maxRuns)
			}
		}
	}
}

// movedPartitions returns the fraction of partitions whose owner differs between a and b.
func movedPartitions(a, b *Ring) float64 {
	n := 0
	for p := range a.owner {
		if a.PartitionOwner(p).Name != b.PartitionOwner(p).Name {
			n++
		}
	}
	return float64(n) / float64(len(a.owner))
}

// TestClusterShapeAgreement: members that advertise different shapes build the legacy
// shape's rings, identical on each of them (a member of the version before shapes were
// advertised is one of the legacy shape: TestMeta), and go back to their own shape once
// the member that differed has left.
func TestClusterShapeAgreement(t *testing.T) {
	a := startNodeWith(t, "a", func(*Config) {})
	if got := a.Ring().Config(); got != DefaultHashConfig() {
		t.Fatalf("a alone builds %s, want its own %s", got, DefaultHashConfig())
	}
	for i, other := range []HashConfig{LegacyHashConfig(), RangeHashConfig()} {
		name := fmt.Sprintf("b%d", i)
		b := startNodeWith(t, name, func(cfg *Config) {
			cfg.Hash = other
			cfg.Join = []string{a.GossipAddr()}
		})
		waitConverged(t, []*node{a, b}, "a,"+name)
		testutil.Eventually(t, converge, "both rings legacy and equal", func() bool {
			ra, rb := a.Ring(), b.Ring()
			return ra.Config() == LegacyHashConfig() && rb.Config() == LegacyHashConfig() && ra.Equal(rb)
		})
		if v := metricValue(t, a.reg, "ring_legacy_shape"); v != 1 {
			t.Errorf("a's ring_legacy_shape = %v with a member of shape %s, want 1", v, other)
		}
		if other != LegacyHashConfig() {
			if v := metricValue(t, b.reg, "ring_legacy_shape"); v != 1 {
				t.Errorf("b's ring_legacy_shape = %v, want 1", v)
			}
		} else if v := metricValue(t, b.reg, "ring_legacy_shape"); v != 0 {
			t.Errorf("b's ring_legacy_shape = %v: its own shape is the legacy one, want 0", v)
		}
		b.stop(t)
		waitConverged(t, []*node{a}, "a")
		testutil.Eventually(t, converge, "a back to its own shape", func() bool { return a.Ring().Config() == DefaultHashConfig() })
		if v := metricValue(t, a.reg, "ring_legacy_shape"); v != 0 {
			t.Errorf("a's ring_legacy_shape = %v alone again, want 0", v)
		}
	}
}
