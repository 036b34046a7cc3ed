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
	sync.Mutex
	m   map[string]weak.Pointer[StringMap]
	buf []byte
	kvs []string
}{m: map[string]weak.Pointer[StringMap]{}}

// internMap returns the StringMap of the entries of m with the given keys (every entry for
// allKeys), or nil when there are none: the one already in use with the same entries, if
// any, else a new one, which copies only the map (its strings are m's).
func internMap(m map[string]string, keys []string) *StringMap {
	if len(m) == 0 {
		return nil
	}
	t := &mapTable
	t.Lock()
	defer t.Unlock()
	kvs := t.kvs[:0]
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
		t.kvs = kvs
		return nil
	}
	slices.Sort(kvs)
	buf := t.buf[:0]
	for _, k := range kvs { // length-prefixed, so that no two maps encode alike
		v := m[k]
		buf = strconv.AppendInt(buf, int64(len(k)), 10)
		buf = append(buf, ':')
		buf = append(buf, k...)
		buf = strconv.AppendInt(buf, int64(len(v)), 10)
		buf = append(buf, ':')
		buf = append(buf, v...)
	}
	t.buf, t.kvs = buf, kvs
	if wp, ok := t.m[string(buf)]; ok {
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
	mapTable.Lock()
	defer mapTable.Unlock()
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
	sync.Mutex
	m   map[string]labelRef
	buf []byte
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
func internLabels(ls []snapshot.Label) []snapshot.Label {
	if len(ls) == 0 {
		return nil
	}
	t := &labelTable
	t.Lock()
	defer t.Unlock()
	buf := t.buf[:0]
	for _, l := range ls {
		buf = strconv.AppendInt(buf, int64(len(l.Key)), 10)
		buf = append(buf, ':')
		buf = append(buf, l.Key...)
		buf = strconv.AppendInt(buf, int64(len(l.Value)), 10)
		buf = append(buf, ':')
		buf = append(buf, l.Value...)
	}
	t.buf = buf
	if r, ok := t.m[string(buf)]; ok && r.n == len(ls) {
		if p := r.first.Value(); p != nil {
			return unsafe.Slice(p, r.n) // the array the weak pointer's first element starts
		}
	}
	out := make([]snapshot.Label, len(ls)) // exactly: its capacity is its length
	copy(out, ls)
	key := string(buf)
	t.m[key] = labelRef{first: weak.Make(&out[0]), n: len(out)}
	runtime.AddCleanup(&out[0], dropLabels, key)
	return out
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
	labelTable.Lock()
	defer labelTable.Unlock()
	return len(labelTable.m)
}
