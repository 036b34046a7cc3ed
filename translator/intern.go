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

// weakTable holds interned values by their encoding (appendKeyed), weakly: an entry goes when
// the last holder of its value does (a cleanup removes it), so that, say, the label set of a
// ReplicaSet long rolled over costs nothing. Looking a value up takes the read lock only (the
// informers' transforms, sources' lookups and the index's workers call it concurrently).
type weakTable[T any] struct {
	mu sync.RWMutex
	m  map[string]weak.Pointer[T]
}

// get returns the value in use under key, or else the new one made returns, which it records
// under key. It allocates nothing when the value is in use.
func (t *weakTable[T]) get(key []byte, made func() *T) *T {
	t.mu.RLock()
	wp := t.m[string(key)]
	t.mu.RUnlock()
	if p := wp.Value(); p != nil {
		return p
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if p := t.m[string(key)].Value(); p != nil { // made since, by another caller
		return p
	}
	p := made()
	k := string(key)
	if t.m == nil {
		t.m = map[string]weak.Pointer[T]{}
	}
	t.m[k] = weak.Make(p)
	runtime.AddCleanup(p, t.drop, k)
	return p
}

// drop removes the entry key when its value is gone (and not made again since).
func (t *weakTable[T]) drop(key string) {
	t.mu.Lock()
	if wp, ok := t.m[key]; ok && wp.Value() == nil {
		delete(t.m, key)
	}
	t.mu.Unlock()
}

// len returns the number of entries (for tests).
func (t *weakTable[T]) len() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.m)
}

// appendKeyed appends k and v to b, each length-prefixed, so that no two lists of pairs
// encode alike.
func appendKeyed(b []byte, k, v string) []byte {
	b = strconv.AppendInt(b, int64(len(k)), 10)
	b = append(b, ':')
	b = append(b, k...)
	b = strconv.AppendInt(b, int64(len(v)), 10)
	b = append(b, ':')
	return append(b, v...)
}

// mapTable holds every StringMap in use; labelTable every interned label slice, by its first
// element (the slice is the array the element starts, of the length its encoding gives).
var (
	mapTable   weakTable[StringMap]
	labelTable weakTable[snapshot.Label]
)

// internMap returns the StringMap of the entries of m with the given keys (every entry for
// allKeys), or nil when there are none: the one already in use with the same entries, if
// any, else a new one, which copies only the map (its strings are m's).
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
	for _, k := range kvs {
		buf = appendKeyed(buf, k, m[k])
	}
	return mapTable.get(buf, func() *StringMap {
		s := &StringMap{m: make(map[string]string, len(kvs))}
		for _, k := range kvs {
			s.m[k] = m[k]
		}
		return s
	})
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
	var bufArr [256]byte
	buf := bufArr[:0]
	for _, l := range ls {
		buf = appendKeyed(buf, l.Key, l.Value)
	}
	first := labelTable.get(buf, func() *snapshot.Label {
		out := make([]snapshot.Label, len(ls))
		copy(out, ls)
		return &out[0]
	})
	return unsafe.Slice(first, len(ls)) // the array first starts: its length is len(ls), as the key says
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
