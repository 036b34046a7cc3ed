package destclient

import (
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/meridian-mesh/meridian/internal/wire"
)

// TestHeldSetAgreesWithAMap applies random batches of puts and removes, small and large
// (both paths), to a heldSet and to a map, and compares them after each.
func TestHeldSetAgreesWithAMap(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	key := func(i int) wire.AddrKey {
		return wire.KeyOf(netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}), 80))
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
		for i := 1; i < len(s.e); i++ {
			if compareEntries(s.e[i-1], s.e[i]) >= 0 {
				t.Fatalf("round %d: entries out of order at %d", round, i)
			}
		}
	}
}
