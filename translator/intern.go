package translator

import (
	"runtime"
	"slices"
	"strconv"
	"sync"
	"unique"
	"weak"
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
