package shard

import (
	"maps"
	"slices"

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
//
// When the source keeps only the pods the index wants (source.PodLoader), a pod that k's
// slices start naming is asked for if the source does not have it, and one no slice names any
// more is let go.
func (x *Index) updateRefs(k ServiceKey, old, next *translator.EndpointSlice) {
	named, unnamed := x.moveRefs(k, old, next)
	if x.podLoader == nil {
		return
	}
	for _, pk := range named {
		if x.pods == nil || x.pods(pk.Namespace, pk.Name) == nil {
			x.podLoader.WantPod(pk.Namespace, pk.Name)
		}
	}
	for _, pk := range unnamed {
		x.podLoader.ForgetPod(pk.Namespace, pk.Name)
	}
}

// moveRefs is updateRefs' walk: it returns the pods named by no slice before and by one now,
// and the reverse (both only when the source keeps some pods only).
func (x *Index) moveRefs(k ServiceKey, old, next *translator.EndpointSlice) (named, unnamed []podKey) {
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
			// A pod may have lost its last reference at one endpoint and gained one at a
			// later one: what counts is how the walk left it.
			named = slices.DeleteFunc(named, func(pk podKey) bool { return len(x.podRefs[pk]) == 0 })
			unnamed = slices.DeleteFunc(unnamed, func(pk podKey) bool { return len(x.podRefs[pk]) > 0 })
			return named, unnamed
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
			if okN && x.addRef(pn, k) && x.podLoader != nil {
				named = append(named, pn)
			}
			j++
		}
		if inO {
			if okO && x.dropRef(po, k) && x.podLoader != nil {
				unnamed = append(unnamed, po)
			}
			i++
		}
	}
}

// addRef counts one more slice of k naming pk, and reports whether pk was named by none
// before; refMu is held.
func (x *Index) addRef(pk podKey, k ServiceKey) bool {
	refs := x.podRefs[pk]
	for i := range refs {
		if refs[i].key == k {
			refs[i].count++
			return false
		}
	}
	x.podRefs[pk] = append(refs, svcRef{key: k, count: 1})
	x.refsPeak = max(x.refsPeak, len(x.podRefs))
	return len(refs) == 0
}

// named reports whether a slice the index keeps names pod ns/name.
func (x *Index) named(ns, name string) bool {
	x.refMu.Lock()
	defer x.refMu.Unlock()
	return len(x.podRefs[podKey{ns, name}]) > 0
}

// compactRefs copies podRefs into a map of its size once it holds under half of its peak
// (the first replica of a ring holds every pod's reference until the others join and take
// their shares; without this it would keep that room for good).
func (x *Index) compactRefs() {
	x.refMu.Lock()
	defer x.refMu.Unlock()
	x.podRefs, x.refsPeak = shrunk(x.podRefs, x.refsPeak)
}

// shrunk returns m, or once m holds under half of peak (the most entries it has held) a
// copy of it at its size, since a Go map keeps the room of its largest size; and the peak to
// count from then on.
func shrunk[K comparable, V any](m map[K]V, peak int) (map[K]V, int) {
	n := len(m)
	if n >= peak/2 {
		return m, peak
	}
	c := make(map[K]V, n) // not maps.Clone, which keeps the room too
	maps.Copy(c, m)
	return c, n
}

// dropRef counts one slice of k naming pk less, and reports whether none names pk now;
// refMu is held.
func (x *Index) dropRef(pk podKey, k ServiceKey) bool {
	refs := x.podRefs[pk]
	for i := range refs {
		if refs[i].key != k {
			continue
		}
		refs[i].count--
		if refs[i].count > 0 {
			return false
		}
		refs = append(refs[:i], refs[i+1:]...)
		if len(refs) == 0 {
			delete(x.podRefs, pk)
			return true
		}
		x.podRefs[pk] = refs
		return false
	}
	return false
}
