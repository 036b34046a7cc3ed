package destclient

import (
	"bytes"
	"encoding/binary"
	"errors"
	"slices"

	"github.com/meridian-mesh/meridian/internal/wire"
)

// heldSet is a set of addresses, each with the fingerprint of its metadata, kept sorted by
// address in arrays of fixed-size entries: nothing for the collector to scan, and a fraction
// of what a map of them takes. IPv4 addresses (nearly every cluster's) take 14 bytes each
// (address, port, fingerprint), the others 27; a relaying replica holds one such set per
// relayed stream, so this is most of what a relayed stream costs it beyond gRPC's own state.
// Updates come in batches (one message's addresses), which are sorted and merged in one
// pass, so that a stream's first update of n addresses costs O(n log n), and a change of a
// few addresses a binary search and a move each.
type heldSet struct {
	v4 []entry4
	v6 []heldEntry
}

// heldEntry is an address of any family with its fingerprint; the set keeps IPv6 ones so.
type heldEntry struct {
	k  wire.AddrKey
	fp [8]byte // the fingerprint, as bytes: no padding after the 19-byte key
}

// entry4 is an IPv4 address (4 bytes), its port (2, big-endian) and its fingerprint.
type entry4 struct {
	k  [6]byte
	fp [8]byte
}

func entryOf(k wire.AddrKey, fp uint64) heldEntry {
	e := heldEntry{k: k}
	binary.LittleEndian.PutUint64(e.fp[:], fp)
	return e
}

// is4 reports whether k is an IPv4 address (wire.KeyOf marks them).
func is4(k wire.AddrKey) bool { return k[18] == 4 }

// key4 is the entry4 key of an IPv4 key k (is4), which wire.KeyOf stores v4-mapped.
func key4(k wire.AddrKey) (k4 [6]byte) {
	copy(k4[:], k[12:18])
	return k4
}

func (e heldEntry) key() wire.AddrKey          { return e.k }
func (e heldEntry) addrKey() wire.AddrKey      { return e.k }
func (e heldEntry) fingerprint() uint64        { return binary.LittleEndian.Uint64(e.fp[:]) }
func (e heldEntry) compare(k wire.AddrKey) int { return bytes.Compare(e.k[:], k[:]) }

func (e entry4) key() [6]byte          { return e.k }
func (e entry4) fingerprint() uint64   { return binary.LittleEndian.Uint64(e.fp[:]) }
func (e entry4) compare(k [6]byte) int { return bytes.Compare(e.k[:], k[:]) }

// addrKey returns the wire.AddrKey of e, as wire.KeyOf gives it.
func (e entry4) addrKey() wire.AddrKey {
	var k wire.AddrKey
	k[10], k[11] = 0xff, 0xff
	copy(k[12:18], e.k[:])
	k[18] = 4
	return k
}

// entry is what the set's arrays hold: an entry with key K, ordered by it.
type entry[K comparable] interface {
	key() K
	fingerprint() uint64
	compare(K) int
	addrKey() wire.AddrKey
}

// fewer than smallBatch addresses are inserted or removed one by one.
const smallBatch = 16

func (s *heldSet) len() int { return len(s.v4) + len(s.v6) }

func (s *heldSet) clear() { s.v4, s.v6 = nil, nil }

// get returns the fingerprint of k and whether k is held.
func (s *heldSet) get(k wire.AddrKey) (uint64, bool) {
	if is4(k) {
		return getEntry(s.v4, key4(k))
	}
	return getEntry(s.v6, k)
}

// each calls f with every address held: the IPv4 ones in order, then the others in order.
func (s *heldSet) each(f func(wire.AddrKey)) {
	for _, e := range s.v4 {
		f(e.addrKey())
	}
	for _, e := range s.v6 {
		f(e.k)
	}
}

// putAll adds the entries of add, replacing those of the same addresses (the last of add's
// wins). It takes add over and may reorder it; it reports whether the set kept add's array
// (an exactly sized one of IPv6 entries into an empty set), which the caller may reuse
// otherwise.
func (s *heldSet) putAll(add []heldEntry) bool {
	n4 := 0
	for _, e := range add {
		if is4(e.k) {
			n4++
		}
	}
	if n4 == 0 {
		s.v6 = putEntries(s.v6, add)
		return sameArray(s.v6, add)
	}
	v4 := make([]entry4, 0, n4)
	n := 0
	for _, e := range add {
		if is4(e.k) {
			v4 = append(v4, entry4{k: key4(e.k), fp: e.fp})
		} else {
			add[n] = e
			n++
		}
	}
	s.v4 = putEntries(s.v4, v4)
	s.v6 = putEntries(s.v6, add[:n])
	return sameArray(s.v6, add)
}

// sameArray reports whether a and b start at the same element of one array.
func sameArray(a, b []heldEntry) bool { return len(a) > 0 && len(b) > 0 && &a[0] == &b[0] }

// removeAll removes the addresses of keys. When one is not held (or is given twice), it
// removes nothing and returns an error naming it.
func (s *heldSet) removeAll(keys []wire.AddrKey) error {
	var r4 []entry4
	var r6 []heldEntry
	for _, k := range keys {
		if is4(k) {
			r4 = append(r4, entry4{k: key4(k)})
		} else {
			r6 = append(r6, heldEntry{k: k})
		}
	}
	if err := checkHeld(s.v4, r4); err != nil {
		return err
	}
	if err := checkHeld(s.v6, r6); err != nil {
		return err
	}
	s.v4 = removeEntries(s.v4, r4)
	s.v6 = removeEntries(s.v6, r6)
	return nil
}

func getEntry[E entry[K], K comparable](es []E, k K) (uint64, bool) {
	i, ok := slices.BinarySearchFunc(es, k, E.compare)
	if !ok {
		return 0, false
	}
	return es[i].fingerprint(), true
}

// byKey orders entries by address.
func byKey[E entry[K], K comparable](a, b E) int { return a.compare(b.key()) }

// putEntries returns es (sorted) with the entries of add, which it takes over: the last of
// add's for an address wins.
func putEntries[E entry[K], K comparable](es, add []E) []E {
	if len(add) == 0 {
		return es
	}
	if len(add) < smallBatch {
		for _, e := range add {
			i, ok := slices.BinarySearchFunc(es, e.key(), E.compare)
			if ok {
				es[i] = e
			} else {
				es = slices.Insert(es, i, e)
			}
		}
		return es
	}
	slices.SortStableFunc(add, byKey[E, K])
	add = DedupeLast(add, byKey[E, K])
	if len(es) == 0 {
		if cap(add) == len(add) {
			return add // the caller's array, of the right size
		}
		return slices.Clone(add)
	}
	return MergeSorted(es, add, byKey[E, K])
}

// checkHeld sorts rm and returns an error naming an address of it that es does not hold,
// or that it has twice.
func checkHeld[E entry[K], K comparable](es, rm []E) error {
	slices.SortFunc(rm, byKey[E, K])
	for i, e := range rm {
		if _, ok := getEntry(es, e.key()); !ok || i > 0 && rm[i-1].key() == e.key() {
			return errors.New("remove of " + e.addrKey().AddrPort().String() + ", which was never added")
		}
	}
	return nil
}

// removeEntries returns es without the addresses of rm (sorted, each held once).
func removeEntries[E entry[K], K comparable](es, rm []E) []E {
	if len(rm) < smallBatch {
		for _, e := range rm {
			i, _ := slices.BinarySearchFunc(es, e.key(), E.compare)
			es = slices.Delete(es, i, i+1)
		}
		return es
	}
	n, j := 0, 0
	for _, e := range es {
		if j < len(rm) && rm[j].key() == e.key() {
			j++
			continue
		}
		es[n] = e
		n++
	}
	clear(es[n:])
	return es[:n]
}
