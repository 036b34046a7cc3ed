package translator

// batch.go: the allocation batch of one address set (endpoints, label slices, identities,
// pod places, the Rare parts endpoints share).

import (
	"slices"
	"unique"

	"github.com/meridian-mesh/meridian/snapshot"
)

// batch hands out the endpoints and label slices of one address set from a few large
// allocations instead of several small ones per address. The endpoints of a set therefore
// share their backing arrays: a pointer to one keeps the whole batch alive, which is what a
// published set does anyway.
type batch struct {
	endpoints []snapshot.Endpoint
	// scratch is where an address's labels are built before they are interned.
	scratch []snapshot.Label
	// The last identity built: the pods of a service mostly share one service account.
	idSA, idNS string
	id         unique.Handle[string]
	// The pod places made, of the first few (namespace, node) pairs seen: a service's pods
	// spread over a few nodes.
	places  [maxPlaces]unique.Handle[snapshot.PodPlace]
	nPlaces int
	// The labels of addresses without a pod, of the first few zones: they share them.
	podless [][]snapshot.Label
	// The labels of pods' addresses last made (podLabels), and of addresses seen from a
	// zone (localized), round robin: a set's pods are of a few workloads and zones, and
	// the global intern table is then asked once for each.
	podLabelCache [8]struct {
		k  podLabelKey
		ls []snapshot.Label
	}
	nPodLabels int
	localCache [8]struct {
		from     *snapshot.Label
		n        int
		locality string
		ls       []snapshot.Label
	}
	nLocal int
	// The Rare parts of the first few hinted zone sets with nothing else rare: the
	// endpoints hinted alike share one.
	rares []*snapshot.Rare
}

// maxSharedRares bounds batch.rares: endpoints are mostly hinted for their own zone, and a
// cluster has a few zones.
const maxSharedRares = 8

// rare returns the Rare part of an endpoint with this hostname, hinted zones (sorted and
// distinct, from the slice's projection, whose slice the set then shares) and authority
// override (nil when it has none of them); those with the same hinted zones and nothing else
// rare share one.
func (b *batch) rare(hostname string, forZones []string, override string) *snapshot.Rare {
	if len(forZones) == 0 {
		return snapshot.NewRare(hostname, nil, override)
	}
	shared := hostname == "" && override == ""
	if shared {
		for _, r := range b.rares {
			if slices.Equal(r.ForZones, forZones) {
				return r
			}
		}
	}
	r := snapshot.NewRare(hostname, forZones, override)
	if shared && len(b.rares) < maxSharedRares {
		b.rares = append(b.rares, r)
	}
	return r
}

// identity returns Identity(cfg, sa, ns) interned (unique.Make), reusing the last one when
// it matches: the sets of every service of a service account, and every set computed again,
// share one copy of the string, which lives while any set holds it.
func (b *batch) identity(cfg Config, sa, ns string) unique.Handle[string] {
	if b.id == (unique.Handle[string]{}) || b.idSA != sa || b.idNS != ns {
		b.idSA, b.idNS, b.id = sa, ns, unique.Make(Identity(cfg, sa, ns))
	}
	return b.id
}

// maxPlaces bounds batch.places: beyond it, each further place is looked up in unique's map.
const maxPlaces = 8

// setPod sets the pod behind e (SetPod), reusing a place made for an earlier endpoint when
// it matches: the pods of a service share a namespace and a few nodes, so unique.Make runs
// about once per place and computation rather than once per address.
func (b *batch) setPod(e *snapshot.Endpoint, name, namespace, nodeName string) {
	p := snapshot.PodPlace{Namespace: namespace, NodeName: nodeName}
	e.Pod = name
	for _, h := range b.places[:b.nPlaces] {
		if h.Value() == p {
			e.Place = h
			return
		}
	}
	e.Place = snapshot.MakePodPlace(p)
	if e.Place != (unique.Handle[snapshot.PodPlace]{}) && b.nPlaces < maxPlaces {
		b.places[b.nPlaces] = e.Place
		b.nPlaces++
	}
}

// podlessLabels returns the labels of an address without a pod in zone ("": unknown): the
// zone when known and zone_locality unknown, interned (internLabels); the batch keeps those
// of the first few zones seen, so that it interns each once.
func (b *batch) podlessLabels(zone string) []snapshot.Label {
	for _, ls := range b.podless {
		if zone == "" && ls[0].Key == LabelKeyZoneLocality || zone != "" && ls[0].Key == LabelKeyZone && ls[0].Value == zone {
			return ls
		}
	}
	labels := b.scratch[:0]
	if zone != "" {
		labels = append(labels, snapshot.Label{Key: LabelKeyZone, Value: zone})
	}
	labels = append(labels, snapshot.Label{Key: LabelKeyZoneLocality, Value: ZoneUnknown})
	b.scratch = labels
	labels = internLabels(labels)
	if len(b.podless) < 8 {
		b.podless = append(b.podless, labels)
	}
	return labels
}

// podLabels returns the labels of a pod's address with the key k: the cached ones, else
// build's, which it caches.
func (b *batch) podLabels(k podLabelKey, build func() []snapshot.Label) []snapshot.Label {
	for i := range min(b.nPodLabels, len(b.podLabelCache)) {
		if c := &b.podLabelCache[i]; c.k == k {
			return c.ls
		}
	}
	ls := build()
	c := &b.podLabelCache[b.nPodLabels%len(b.podLabelCache)]
	c.k, c.ls = k, ls
	b.nPodLabels++
	return ls
}

// localized returns the labels from (non-empty) with zone_locality set to locality: the
// cached ones for the same slice, else build's, which it caches.
func (b *batch) localized(from []snapshot.Label, locality string, build func() []snapshot.Label) []snapshot.Label {
	for i := range min(b.nLocal, len(b.localCache)) {
		if c := &b.localCache[i]; c.from == &from[0] && c.n == len(from) && c.locality == locality {
			return c.ls
		}
	}
	ls := build()
	c := &b.localCache[b.nLocal%len(b.localCache)]
	c.from, c.n, c.locality, c.ls = &from[0], len(from), locality, ls
	b.nLocal++
	return ls
}

// endpoint returns a zero endpoint of the batch. A batch allocated with the exact count
// never grows; one that starts empty grows by doubling from one, so that the few new
// endpoints of an incremental computation (each kept alive by the snapshots that hold it)
// do not pin a large array.
func (b *batch) endpoint() *snapshot.Endpoint {
	if len(b.endpoints) == cap(b.endpoints) {
		b.endpoints = make([]snapshot.Endpoint, 0, min(max(1, 2*cap(b.endpoints)), 256))
	}
	b.endpoints = b.endpoints[:len(b.endpoints)+1]
	return &b.endpoints[len(b.endpoints)-1]
}
