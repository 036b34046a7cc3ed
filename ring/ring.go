package ring

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"strings"

	"github.com/cespare/xxhash/v2"
)

// Member is one destination replica in the ring.
type Member struct {
	// Name is the memberlist node name; it is the member's identity in the ring.
	Name string
	// Addr is the replica's advertised gRPC address (host:port), from its gossip metadata.
	Addr string
}

// HashConfig sets the shape of a ring. Two rings built from the same members with the same
// HashConfig assign every key identically, so every replica must use the same values.
type HashConfig struct {
	// Partitions is the number of fixed partitions keys hash into (P). Ownership moves a
	// partition at a time. More partitions give a finer balance and a larger ring value
	// (4 bytes each). Must be in [1, MaxPartitions].
	Partitions int
	// VirtualNodes is the number of points each member places on the hash circle.
	// Must be in [1, MaxVirtualNodes].
	VirtualNodes int
	// LoadFactor bounds each member to at most ceil(LoadFactor*Partitions/N) partitions.
	// Must be at least 1. A tighter bound evens the shares out and moves a few more
	// partitions on a join or a leave.
	LoadFactor float64
	// Contiguous places each partition on the circle at the first hash of its own range of
	// key hashes, rather than at a hash of its number. Partitions next to each other in
	// hash space then go to the same member up to one of its virtual nodes, so that a
	// member's share is about VirtualNodes ranges of key hashes instead of partitions
	// scattered over all of them: what a share is asked for by ranges (an API server's
	// shard selector) wants.
	Contiguous bool
}

// Limits on HashConfig values and on ring size.
const (
	MaxPartitions   = 1 << 20
	MaxVirtualNodes = 4096
	// MaxMembers is the largest ring Build accepts; further members (in name order) are
	// dropped.
	MaxMembers = 1 << 16
)

// DefaultHashConfig returns the shape every replica uses unless configured otherwise:
// 4096 partitions, 256 virtual nodes per member, load factor 1.02. No member owns more
// than 1.02 times its fair share of partitions (rounded up); a join or a leave moves about
// 1.05 times the minimal 1/N of them at 4 members, 1.2 times at 16 and 1.35 times at 32
// (TestShapes).
func DefaultHashConfig() HashConfig {
	return HashConfig{Partitions: 4096, VirtualNodes: 256, LoadFactor: 1.02}
}

// RangeHashConfig returns the shape for rings whose shares are asked for as ranges of key
// hashes: contiguous placement, 4096 partitions, 64 virtual nodes per member (a share of
// about 64 ranges; TestShapes), load factor 1.05.
func RangeHashConfig() HashConfig {
	return HashConfig{Partitions: 4096, VirtualNodes: 64, LoadFactor: 1.05, Contiguous: true}
}

// LegacyHashConfig returns the shape every member used before members advertised theirs
// (4096 partitions, 256 virtual nodes, load factor 1.25, scattered placement). A Cluster
// whose members do not all advertise the same shape builds its rings with this one, which
// every version can compute: a rolling upgrade from a version before shapes were advertised
// keeps one assignment throughout, and changes to the new shape once, when the last member
// of the old version has gone.
func LegacyHashConfig() HashConfig {
	return HashConfig{Partitions: 4096, VirtualNodes: 256, LoadFactor: 1.25}
}

// String is the shape's advertised form, the same for equal configs:
// "p4096/v256/l1.02", with "/contiguous" when Contiguous.
func (c HashConfig) String() string {
	s := "p" + strconv.Itoa(c.Partitions) + "/v" + strconv.Itoa(c.VirtualNodes) + "/l" + strconv.FormatFloat(c.LoadFactor, 'g', -1, 64)
	if c.Contiguous {
		s += "/contiguous"
	}
	return s
}

// Validate reports whether c describes a ring Build can make.
func (c HashConfig) Validate() error {
	switch {
	case c.Partitions < 1 || c.Partitions > MaxPartitions:
		return fmt.Errorf("ring partitions %d: want 1..%d", c.Partitions, MaxPartitions)
	case c.VirtualNodes < 1 || c.VirtualNodes > MaxVirtualNodes:
		return fmt.Errorf("ring virtual nodes %d: want 1..%d", c.VirtualNodes, MaxVirtualNodes)
	case math.IsNaN(c.LoadFactor) || c.LoadFactor < 1 || c.LoadFactor > 1e6:
		return fmt.Errorf("ring load factor %v: want at least 1", c.LoadFactor)
	}
	return nil
}

// Ring maps service keys ("namespace/name") to the member that owns them. Keys are looked up
// by string (Owner, Owns) or by their KeyHash (OwnerOfHash, OwnsHash; ServiceHash computes
// a service's without building its key).
//
// A Ring is an immutable value: nothing changes it after Build returns, so it is shared by
// pointer between goroutines without locks. Membership changes produce a new Ring.
//
// Keys hash (xxhash) into one of a fixed number of partitions, and partitions are assigned
// to members by consistent hashing with bounded load: each partition goes to the first
// member clockwise of the partition's point on a circle of virtual nodes that still has
// room, where room is ceil(LoadFactor*P/N) partitions. A member therefore never owns more
// than about LoadFactor times its fair share of partitions (and so of keys), and a join or
// leave moves close to the minimal 1/N of them.
//
// The zero Ring and a Ring of no members own nothing: Owner returns the zero Member.
type Ring struct {
	cfg     HashConfig
	members []Member // sorted by Name, unique names
	owner   []uint32 // partition -> index into members; empty when there are no members
	counts  []int    // members[i] owns counts[i] partitions
	id      uint64
}

// Build returns the ring of members. The result depends only on the set of members (their
// order in the slice does not matter) and on cfg. Members with an empty Name are ignored;
// when names repeat, the entry with the smallest Addr is kept. An invalid cfg is replaced
// by DefaultHashConfig (call cfg.Validate to reject it instead). Build does not retain
// members.
func Build(members []Member, cfg HashConfig) *Ring {
	if cfg.Validate() != nil {
		cfg = DefaultHashConfig()
	}
	ms := make([]Member, 0, len(members))
	for _, m := range members {
		if m.Name != "" {
			ms = append(ms, m)
		}
	}
	slices.SortFunc(ms, func(a, b Member) int {
		if c := strings.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		return strings.Compare(a.Addr, b.Addr)
	})
	ms = slices.CompactFunc(ms, func(a, b Member) bool { return a.Name == b.Name })
	if len(ms) > MaxMembers {
		ms = ms[:MaxMembers]
	}
	ms = slices.Clip(ms)

	r := &Ring{cfg: cfg, members: ms, counts: make([]int, len(ms))}
	r.id = ringID(ms, cfg)
	if len(ms) == 0 {
		return r
	}
	r.owner = assign(ms, cfg, r.counts)
	return r
}

// vnode is one point of a member on the hash circle.
type vnode struct {
	hash   uint64
	member uint32
}

// assign computes the partition -> member table and fills counts.
func assign(ms []Member, cfg HashConfig, counts []int) []uint32 {
	n := len(ms)
	circle := make([]vnode, 0, n*cfg.VirtualNodes)
	var buf []byte
	for i, m := range ms {
		buf = append(buf[:0], "vnode\x00"...)
		buf = append(buf, m.Name...)
		buf = append(buf, 0, 0, 0, 0)
		for v := 0; v < cfg.VirtualNodes; v++ {
			binary.LittleEndian.PutUint32(buf[len(buf)-4:], uint32(v))
			circle = append(circle, vnode{hash: xxhash.Sum64(buf), member: uint32(i)})
		}
	}
	slices.SortFunc(circle, func(a, b vnode) int {
		if a.hash != b.hash {
			if a.hash < b.hash {
				return -1
			}
			return 1
		}
		return int(a.member) - int(b.member)
	})

	p := cfg.Partitions
	capacity := int(math.Ceil(cfg.LoadFactor * float64(p) / float64(n)))
	if capacity*n < p { // guard float rounding; cannot happen with LoadFactor >= 1
		capacity = (p + n - 1) / n
	}
	owner := make([]uint32, p)
	var pbuf [16]byte
	copy(pbuf[:], "part\x00\x00\x00\x00")
	for part := 0; part < p; part++ {
		var h uint64
		if cfg.Contiguous {
			h, _ = bits.Div64(uint64(part), 0, uint64(p)) // floor(part * 2^64 / p): its range's start
		} else {
			binary.LittleEndian.PutUint64(pbuf[8:], uint64(part))
			h = xxhash.Sum64(pbuf[:])
		}
		i, _ := slices.BinarySearchFunc(circle, h, func(v vnode, h uint64) int {
			if v.hash < h {
				return -1
			}
			if v.hash > h {
				return 1
			}
			return 0
		})
		// Walk clockwise to the first member with room. capacity*n >= p guarantees one.
		for {
			if i == len(circle) {
				i = 0
			}
			m := circle[i].member
			if counts[m] < capacity {
				owner[part] = m
				counts[m]++
				break
			}
			i++
		}
	}
	return owner
}

// ringID hashes everything the assignment depends on.
func ringID(ms []Member, cfg HashConfig) uint64 {
	d := xxhash.New()
	var b [8]byte
	for _, v := range []uint64{uint64(cfg.Partitions), uint64(cfg.VirtualNodes), math.Float64bits(cfg.LoadFactor)} {
		binary.LittleEndian.PutUint64(b[:], v)
		_, _ = d.Write(b[:])
	}
	if cfg.Contiguous { // only then, so that the IDs of scattered rings stay as they were
		_, _ = d.WriteString("contiguous\x00")
	}
	for _, m := range ms {
		_, _ = d.WriteString(m.Name)
		_, _ = d.Write([]byte{0})
		_, _ = d.WriteString(m.Addr)
		_, _ = d.Write([]byte{0})
	}
	return d.Sum64()
}

// KeyHash returns the 64-bit hash of key that places it in the ring (xxhash). The *Hash
// lookups take it, so that a caller holding a key's hash looks the key up without hashing
// (or building) its string again.
func KeyHash(key string) uint64 { return xxhash.Sum64String(key) }

// ServiceHash returns KeyHash(namespace + "/" + name), the hash of a service's key, without
// building that string. It does not allocate.
func ServiceHash(namespace, name string) uint64 {
	var d xxhash.Digest
	d.Reset()
	_, _ = d.WriteString(namespace)
	_, _ = d.WriteString("/")
	_, _ = d.WriteString(name)
	return d.Sum64()
}

// Partition returns the partition key hashes into, in [0, Partitions()). It does not
// depend on the members.
func (r *Ring) Partition(key string) int { return r.PartitionOfHash(KeyHash(key)) }

// PartitionOfHash returns the partition of the key whose KeyHash is h.
func (r *Ring) PartitionOfHash(h uint64) int {
	hi, _ := bits.Mul64(h, uint64(r.cfg.Partitions))
	return int(hi)
}

// Owner returns the member that owns key, or the zero Member when the ring is empty.
// It takes no lock and does not allocate.
func (r *Ring) Owner(key string) Member { return r.OwnerOfHash(KeyHash(key)) }

// OwnerOfHash returns the member that owns the key whose KeyHash is h (Owner(key) ==
// OwnerOfHash(KeyHash(key))), or the zero Member when the ring is empty. It takes no lock
// and does not allocate.
func (r *Ring) OwnerOfHash(h uint64) Member {
	if len(r.owner) == 0 {
		return Member{}
	}
	return r.members[r.owner[r.PartitionOfHash(h)]]
}

// Owns reports whether the member named self owns key. It takes no lock and does not
// allocate.
func (r *Ring) Owns(key, self string) bool { return r.OwnsHash(KeyHash(key), self) }

// OwnsHash reports whether the member named self owns the key whose KeyHash is h. It takes
// no lock and does not allocate.
func (r *Ring) OwnsHash(h uint64, self string) bool {
	if len(r.owner) == 0 {
		return false
	}
	return r.members[r.owner[r.PartitionOfHash(h)]].Name == self
}

// PartitionOwner returns the owner of partition p, or the zero Member when the ring is
// empty or p is out of range.
func (r *Ring) PartitionOwner(p int) Member {
	if p < 0 || p >= len(r.owner) {
		return Member{}
	}
	return r.members[r.owner[p]]
}

// Partitions returns the number of partitions keys hash into.
func (r *Ring) Partitions() int { return r.cfg.Partitions }

// Config returns the shape the ring was built with.
func (r *Ring) Config() HashConfig { return r.cfg }

// Len returns the number of members.
func (r *Ring) Len() int { return len(r.members) }

// Members returns a copy of the members, sorted by name.
func (r *Ring) Members() []Member { return slices.Clone(r.members) }

// Member returns the member named name and whether it is in the ring.
func (r *Ring) Member(name string) (Member, bool) {
	i, ok := slices.BinarySearchFunc(r.members, name, func(m Member, n string) int {
		return strings.Compare(m.Name, n)
	})
	if !ok {
		return Member{}, false
	}
	return r.members[i], true
}

// OwnedPartitions returns how many partitions the member named name owns (0 when absent).
func (r *Ring) OwnedPartitions(name string) int {
	i, ok := slices.BinarySearchFunc(r.members, name, func(m Member, n string) int {
		return strings.Compare(m.Name, n)
	})
	if !ok {
		return 0
	}
	return r.counts[i]
}

// ID identifies the ring's assignment: rings with equal IDs were built from the same
// members (names and addresses) and HashConfig, and so assign every key identically.
// It is a hash, stable across processes and versions of this package that keep the
// assignment unchanged.
func (r *Ring) ID() uint64 { return r.id }

// Equal reports whether r and o assign every key to the same member (same ID).
func (r *Ring) Equal(o *Ring) bool {
	if r == nil || o == nil {
		return r == o
	}
	return r.id == o.id
}

// Shares counts how many of keys each member owns. Every member appears in the result,
// with 0 when it owns none of keys.
func (r *Ring) Shares(keys []string) map[string]int {
	out := make(map[string]int, len(r.members))
	for _, m := range r.members {
		out[m.Name] = 0
	}
	if len(r.owner) == 0 {
		return out
	}
	for _, k := range keys {
		out[r.Owner(k).Name]++
	}
	return out
}

// String describes the ring briefly for logs: its ID and members.
func (r *Ring) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "ring %016x [", r.id)
	for i, m := range r.members {
		if i > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "%s=%s(%d)", m.Name, m.Addr, r.counts[i])
	}
	b.WriteString("]")
	return b.String()
}

// Status is a ring's description for tools and admin endpoints (`meridian ring`); it
// marshals to JSON.
type Status struct {
	// ID is Ring.ID in hex.
	ID         string `json:"id"`
	Partitions int    `json:"partitions"`
	// Shape is the HashConfig the ring was built with (HashConfig.String).
	Shape   string         `json:"shape"`
	Members []MemberStatus `json:"members"`
}

// MemberStatus is one member's line in a Status.
type MemberStatus struct {
	Name string `json:"name"`
	Addr string `json:"addr"`
	// Partitions is how many partitions the member owns; Share is that as a fraction of
	// all partitions, which is the expected fraction of services it owns.
	Partitions int     `json:"partitions"`
	Share      float64 `json:"share"`
}

// Status describes r: its ID and each member (sorted by name) with its partition share.
func (r *Ring) Status() Status {
	s := Status{ID: fmt.Sprintf("%016x", r.id), Partitions: r.cfg.Partitions, Shape: r.cfg.String(), Members: make([]MemberStatus, len(r.members))}
	for i, m := range r.members {
		share := 0.0
		if r.cfg.Partitions > 0 {
			share = float64(r.counts[i]) / float64(r.cfg.Partitions)
		}
		s.Members[i] = MemberStatus{Name: m.Name, Addr: m.Addr, Partitions: r.counts[i], Share: share}
	}
	return s
}
