package destclient

import (
	"bytes"
	"encoding/binary"
	"errors"
	"slices"

	"github.com/meridian-mesh/meridian/internal/wire"
)

// heldSet is a set of addresses, each with the fingerprint of its metadata, kept sorted by
// address in one array of 27-byte entries: about half of what a map of them takes, and
// nothing for the collector to scan. Updates come in batches (one message's addresses), which
// are sorted and merged in one pass, so that a stream's first update of n addresses costs
// O(n log n), and a change of a few addresses a binary search and a move each.
type heldSet struct{ e []heldEntry }

type heldEntry struct {
	k  wire.AddrKey
	fp [8]byte // the fingerprint, as bytes: no padding after the 19-byte key
}

func entryOf(k wire.AddrKey, fp uint64) heldEntry {
	e := heldEntry{k: k}
	binary.LittleEndian.PutUint64(e.fp[:], fp)
	return e
}

func (e heldEntry) fingerprint() uint64 { return binary.LittleEndian.Uint64(e.fp[:]) }

func compareEntries(a, b heldEntry) int { return bytes.Compare(a.k[:], b.k[:]) }

func compareKey(e heldEntry, k wire.AddrKey) int { return bytes.Compare(e.k[:], k[:]) }

// fewer than smallBatch addresses are inserted or removed one by one.
const smallBatch = 16

func (s *heldSet) len() int { return len(s.e) }

func (s *heldSet) clear() { s.e = nil }

// get returns the fingerprint of k and whether k is held.
func (s *heldSet) get(k wire.AddrKey) (uint64, bool) {
	i, ok := slices.BinarySearchFunc(s.e, k, compareKey)
	if !ok {
		return 0, false
	}
	return s.e[i].fingerprint(), true
}

// each calls f with every address held, in order.
func (s *heldSet) each(f func(wire.AddrKey)) {
	for _, e := range s.e {
		f(e.k)
	}
}

// putAll adds the entries of add, replacing those of the same addresses (the last of add's
// wins). It takes add over and may reorder it.
func (s *heldSet) putAll(add []heldEntry) {
	if len(add) == 0 {
		return
	}
	if len(add) < smallBatch {
		for _, e := range add {
			i, ok := slices.BinarySearchFunc(s.e, e.k, compareKey)
			if ok {
				s.e[i] = e
			} else {
				s.e = slices.Insert(s.e, i, e)
			}
		}
		return
	}
	slices.SortStableFunc(add, compareEntries)
	// Of entries for one address, keep the last.
	n := 0
	for i, e := range add {
		if i+1 < len(add) && add[i+1].k == e.k {
			continue
		}
		add[n] = e
		n++
	}
	add = add[:n]
	if len(s.e) == 0 {
		s.e = slices.Clone(add)
		return
	}
	merged := make([]heldEntry, 0, len(s.e)+len(add))
	i, j := 0, 0
	for i < len(s.e) && j < len(add) {
		switch c := compareEntries(s.e[i], add[j]); {
		case c < 0:
			merged = append(merged, s.e[i])
			i++
		case c > 0:
			merged = append(merged, add[j])
			j++
		default:
			merged = append(merged, add[j])
			i++
			j++
		}
	}
	merged = append(append(merged, s.e[i:]...), add[j:]...)
	s.e = slices.Clip(merged)
}

// removeAll removes the addresses of keys (which it may reorder). When one is not held (or is
// given twice), it removes nothing and returns an error naming it.
func (s *heldSet) removeAll(keys []wire.AddrKey) error {
	slices.SortFunc(keys, func(a, b wire.AddrKey) int { return bytes.Compare(a[:], b[:]) })
	for i, k := range keys {
		if _, ok := s.get(k); !ok || i > 0 && keys[i-1] == k {
			return errors.New("remove of " + k.AddrPort().String() + ", which was never added")
		}
	}
	if len(keys) < smallBatch {
		for _, k := range keys {
			i, _ := slices.BinarySearchFunc(s.e, k, compareKey)
			s.e = slices.Delete(s.e, i, i+1)
		}
		return nil
	}
	n, j := 0, 0
	for _, e := range s.e {
		if j < len(keys) && keys[j] == e.k {
			j++
			continue
		}
		s.e[n] = e
		n++
	}
	clear(s.e[n:])
	s.e = s.e[:n]
	return nil
}
