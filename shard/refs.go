package shard

import (
	"maps"

	"github.com/meridian-mesh/meridian/translator"
)

// slicePod returns the pod endpoint i of es names, if any.
func slicePod(es *translator.EndpointSlice, i int) (podKey, bool) {
	e := &es.Endpoints[i]
	if e.Pod == "" {
		return podKey{}, false
	}
	return podKey{e.PodNamespace(es), e.Pod}, true
}

// updateRefs moves k's references from the pods of old to those of next (either may be nil).
// A slice update mostly keeps its endpoints in order, changing, inserting or removing one or
// a few, so the two lists are walked side by side and only the pods where they differ are
// touched (one skipped insertion or removal is recognised as such): a change of one endpoint
// costs one or two reference updates, not one per endpoint.
func (x *Index) updateRefs(k ServiceKey, old, next *translator.EndpointSlice) {
	at := func(es *translator.EndpointSlice, i int) (podKey, bool, bool) {
		if es == nil || i >= len(es.Endpoints) {
			return podKey{}, false, false
		}
		pk, ok := slicePod(es, i)
		return pk, ok, true
	}
	same := func(a podKey, aok bool, b podKey, bok bool) bool { return aok == bok && a == b }
	x.refMu.Lock()
	defer x.refMu.Unlock()
	i, j := 0, 0
	for {
		po, okO, inO := at(old, i)
		pn, okN, inN := at(next, j)
		if !inO && !inN {
			return
		}
		switch {
		case inO && inN && same(po, okO, pn, okN):
			i, j = i+1, j+1
			continue
		case inO && inN:
			if p2, ok2, in2 := at(old, i+1); in2 && same(p2, ok2, pn, okN) {
				inN = false // old[i] was removed
			} else if p2, ok2, in2 := at(next, j+1); in2 && same(po, okO, p2, ok2) {
				inO = false // next[j] was inserted
			}
		}
		// Add before removing, so that a pod named on both sides keeps its entry.
		if inN {
			if okN {
				x.addRef(pn, k)
			}
			j++
		}
		if inO {
			if okO {
				x.dropRef(po, k)
			}
			i++
		}
	}
}

// addRef counts one more slice of k naming pk; refMu is held.
func (x *Index) addRef(pk podKey, k ServiceKey) {
	refs := x.podRefs[pk]
	for i := range refs {
		if refs[i].key == k {
			refs[i].count++
			return
		}
	}
	x.podRefs[pk] = append(refs, svcRef{key: k, count: 1})
	x.refsPeak = max(x.refsPeak, len(x.podRefs))
}

// compactRefs copies podRefs into a map of its size once it holds under half of its peak
// (the first replica of a ring holds every pod's reference until the others join and take
// their shares; without this it would keep that room for good).
func (x *Index) compactRefs() {
	x.refMu.Lock()
	defer x.refMu.Unlock()
	if n := len(x.podRefs); n < x.refsPeak/2 {
		m := make(map[podKey][]svcRef, n) // not maps.Clone, which keeps the room too
		maps.Copy(m, x.podRefs)
		x.podRefs, x.refsPeak = m, n
	}
}

// dropRef counts one slice of k naming pk less; refMu is held.
func (x *Index) dropRef(pk podKey, k ServiceKey) {
	refs := x.podRefs[pk]
	for i := range refs {
		if refs[i].key != k {
			continue
		}
		refs[i].count--
		if refs[i].count > 0 {
			return
		}
		refs = append(refs[:i], refs[i+1:]...)
		if len(refs) == 0 {
			delete(x.podRefs, pk)
		} else {
			x.podRefs[pk] = refs
		}
		return
	}
}
