package destclient

import (
	"math/rand/v2"
	"net/netip"
	"testing"
	"unsafe"

	"github.com/meridian-mesh/meridian/internal/wire"
)

// TestHeldSetAgreesWithAMap applies random batches of puts and removes, small and large
// (both paths), of IPv4 and IPv6 addresses (kept apart), to a heldSet and to a map, and
// compares them after each.
func TestHeldSetAgreesWithAMap(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	key := func(i int) wire.AddrKey {
		if i%3 == 0 { // an IPv6 address, and one v4-mapped
			return wire.KeyOf(netip.AddrPortFrom(netip.AddrFrom16([16]byte{10: 0xff, 11: byte(i % 2 * 0xff), 14: byte(i >> 8), 15: byte(i)}), 80))
		}
		return wire.KeyOf(netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}), uint16(80+i%2)))
	}
	var s heldSet
	m := map[wire.AddrKey]uint64{}
	for round := range 300 {
		n := r.IntN(40) // below and above smallBatch
		if r.IntN(2) == 0 {
			var add []heldEntry
			for range n {
				k, fp := key(r.IntN(200)), r.Uint64()
				add = append(add, entryOf(k, fp))
				m[k] = fp // the last for an address wins
			}
			s.putAll(add)
		} else {
			var keys []wire.AddrKey
			seen := map[wire.AddrKey]bool{}
			for k := range m {
				if len(keys) == n {
					break
				}
				keys, seen[k] = append(keys, k), true
			}
			bad := r.IntN(4) == 0
			if bad { // one address not held: nothing is removed
				keys = append(keys, key(1000))
			}
			err := s.removeAll(keys)
			if bad != (err != nil) {
				t.Fatalf("round %d: removeAll error %v, want error %v", round, err, bad)
			}
			if !bad {
				for k := range seen {
					delete(m, k)
				}
			}
		}
		if s.len() != len(m) {
			t.Fatalf("round %d: %d held, want %d", round, s.len(), len(m))
		}
		for k, fp := range m {
			if got, ok := s.get(k); !ok || got != fp {
				t.Fatalf("round %d: %v: got %x %v, want %x", round, k.AddrPort(), got, ok, fp)
			}
		}
		for i := 1; i < len(s.v4); i++ {
			if byKey(s.v4[i-1], s.v4[i]) >= 0 {
				t.Fatalf("round %d: IPv4 entries out of order at %d", round, i)
			}
		}
		for i := 1; i < len(s.v6); i++ {
			if byKey(s.v6[i-1], s.v6[i]) >= 0 {
				t.Fatalf("round %d: IPv6 entries out of order at %d", round, i)
			}
		}
		for _, e := range s.v6 {
			if is4(e.k) {
				t.Fatalf("round %d: IPv4 address %v kept with the IPv6 ones", round, e.k.AddrPort())
			}
		}
		seen := 0
		s.each(func(k wire.AddrKey) {
			if _, ok := m[k]; !ok {
				t.Fatalf("round %d: each gave %v, which is not held", round, k.AddrPort())
			}
			seen++
		})
		if seen != len(m) {
			t.Fatalf("round %d: each gave %d addresses, want %d", round, seen, len(m))
		}
	}
}

// TestHeldSetIPv4Size: an IPv4 address takes 14 bytes (address, port, fingerprint), and a
// first update's batch is kept in an array of its size: a relayed stream of 100 endpoints
// holds 1,400 bytes for them, not the 2,700 of 27-byte entries.
func TestHeldSetIPv4Size(t *testing.T) {
	if n := unsafe.Sizeof(entry4{}); n != 14 {
		t.Errorf("an IPv4 entry takes %d bytes, want 14", n)
	}
	var add []heldEntry
	for i := range 100 {
		add = append(add, entryOf(wire.KeyOf(netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 1, 0, byte(i)}), 8080)), uint64(i)))
	}
	var s heldSet
	s.putAll(add)
	if len(s.v4) != 100 || cap(s.v4) != 100 || s.v6 != nil {
		t.Errorf("100 IPv4 addresses: len %d cap %d of IPv4 entries, %d others; want 100, 100, none", len(s.v4), cap(s.v4), len(s.v6))
	}
}
