package translator

import (
	"runtime"
	"slices"
	"strconv"
	"sync"
	"unique"
	"unsafe"
	"weak"

	"github.com/meridian-mesh/meridian/snapshot"
)

// StringMap is a read-only map of strings that objects with the same entries share (a pod's
// labels, say: the pods of one ReplicaSet have the same ones). It is made by internMap and
// never modified; a nil *StringMap is the empty map.
type StringMap struct{ m map[string]string }

// Map returns the entries (nil for none). The map must not be modified.
func (s *StringMap) Map() map[string]string {
	if s == nil {
		return nil
	}
	return s.m
}

// Get returns the entry k and whether there is one.
func (s *StringMap) Get(k string) (string, bool) {
	if s == nil {
		return "", false
	}
	v, ok := s.m[k]
	return v, ok
}

// mapTable holds every StringMap in use, by its entries' encoding (mapKey), weakly: an
// entry goes when the last object holding its map does (a cleanup removes it), so a label set
// of a ReplicaSet long rolled over costs nothing.
var mapTable = struct {
	sync.RWMutex
	m map[string]weak.Pointer[StringMap]
}{m: map[string]weak.Pointer[StringMap]{}}

// internMap returns the StringMap of the entries of m with the given keys (every entry for
// allKeys), or nil when there are none: the one already in use with the same entries, if
// any, else a new one, which copies only the map (its strings are m's). Looking one up takes
// the table's read lock only (the informers' transforms and sources' lookups call it
// concurrently), and allocates nothing.
func internMap(m map[string]string, keys []string) *StringMap {
	if len(m) == 0 {
		return nil
	}
	var kvArr [16]string
	kvs := kvArr[:0]
	if len(keys) == 1 && keys[0] == allKeys[0] {
		for k := range m {
			kvs = append(kvs, k)
		}
	} else {
		for _, k := range keys {
			if _, ok := m[k]; ok {
				kvs = append(kvs, k)
			}
		}
	}
	if len(kvs) == 0 {
		return nil
	}
	slices.Sort(kvs)
	var bufArr [256]byte
	buf := bufArr[:0]
	for _, k := range kvs { // length-prefixed, so that no two maps encode alike
		buf = appendKeyed(buf, k, m[k])
	}
	t := &mapTable
	t.RLock()
	wp, ok := t.m[string(buf)]
	t.RUnlock()
	if ok {
		if s := wp.Value(); s != nil {
			return s
		}
	}
	t.Lock()
	defer t.Unlock()
	if wp, ok := t.m[string(buf)]; ok { // made since, by another caller
		if s := wp.Value(); s != nil {
			return s
		}
	}
	s := &StringMap{m: make(map[string]string, len(kvs))}
	for _, k := range kvs {
		s.m[k] = m[k]
	}
	key := string(buf)
	t.m[key] = weak.Make(s)
	runtime.AddCleanup(s, dropMap, key)
	return s
}

// appendKeyed appends k and v to b, each length-prefixed.
func appendKeyed(b []byte, k, v string) []byte {
	b = strconv.AppendInt(b, int64(len(k)), 10)
	b = append(b, ':')
	b = append(b, k...)
	b = strconv.AppendInt(b, int64(len(v)), 10)
	b = append(b, ':')
	return append(b, v...)
}

// dropMap removes the table's entry key when its map is gone (and not made again since).
func dropMap(key string) {
	t := &mapTable
	t.Lock()
	if wp, ok := t.m[key]; ok && wp.Value() == nil {
		delete(t.m, key)
	}
	t.Unlock()
}

// internedMaps returns the number of entries in the table (for tests).
func internedMaps() int {
	mapTable.RLock()
	defer mapTable.RUnlock()
	return len(mapTable.m)
}

// name is a string that many objects repeat (a namespace, node, service account, owner or
// port name), held once: every holder of a name shares the one copy, which goes when the last
// holder does. The zero name is "".
type name = unique.Handle[string]

// mkName returns the name of s.
func mkName(s string) name {
	if s == "" {
		return name{}
	}
	return unique.Make(s)
}

// str returns the string of n.
func str(n name) string {
	if n == (name{}) {
		return ""
	}
	return n.Value()
}

// labelTable holds every interned label slice (internLabels) by its labels' encoding, weakly,
// as mapTable does: an entry goes when no endpoint holds its slice any more.
var labelTable = struct {
	sync.RWMutex
	m map[string]labelRef
}{m: map[string]labelRef{}}

// labelRef is an interned label slice: its first element, weakly, and its length.
type labelRef struct {
	first weak.Pointer[snapshot.Label]
	n     int
}

// internLabels returns a slice equal to ls (nil for none) that every holder of the same
// labels shares: the one in use, if any, else a copy of ls, whose capacity is its length (an
// append copies it). The endpoints of the pods of one workload carry the same labels (their
// pod is not among them: snapshot.LabelPod), so a set holds one slice per workload and zone
// rather than one per endpoint, and a recomputed set shares the slices of the one before.
// Looking one up takes the table's read lock only, and allocates nothing.
func internLabels(ls []snapshot.Label) []snapshot.Label {
	if len(ls) == 0 {
		return nil
	}
	var bufArr [256]byte
	buf := bufArr[:0]
	for _, l := range ls {
		buf = appendKeyed(buf, l.Key, l.Value)
	}
	t := &labelTable
	t.RLock()
	r, ok := t.m[string(buf)]
	t.RUnlock()
	if got := r.slice(ok, len(ls)); got != nil {
		return got
	}
	t.Lock()
	defer t.Unlock()
	r, ok = t.m[string(buf)] // made since, by another caller
	if got := r.slice(ok, len(ls)); got != nil {
		return got
	}
	out := make([]snapshot.Label, len(ls)) // exactly: its capacity is its length
	copy(out, ls)
	key := string(buf)
	t.m[key] = labelRef{first: weak.Make(&out[0]), n: len(out)}
	runtime.AddCleanup(&out[0], dropLabels, key)
	return out
}

// slice returns the interned slice r refers to, of n labels, or nil when there is none (ok
// false, or it is gone).
func (r labelRef) slice(ok bool, n int) []snapshot.Label {
	if !ok || r.n != n {
		return nil
	}
	if p := r.first.Value(); p != nil {
		return unsafe.Slice(p, n) // the array whose first element the weak pointer holds
	}
	return nil
}

// dropLabels removes the table's entry key when its slice is gone (and not made again since).
func dropLabels(key string) {
	t := &labelTable
	t.Lock()
	if r, ok := t.m[key]; ok && r.first.Value() == nil {
		delete(t.m, key)
	}
	t.Unlock()
}

// internedLabels returns the number of entries in the label table (for tests).
func internedLabels() int {
	labelTable.RLock()
	defer labelTable.RUnlock()
	return len(labelTable.m)
}
