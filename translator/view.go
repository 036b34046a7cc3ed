package translator

import (
	"slices"

	"github.com/meridian-mesh/meridian/snapshot"
)

// Client is what a view of an address set depends on: the client's node and that node's
// zone (either "" when unknown), from the context token and the Node.
type Client struct {
	Node, Zone string
}

// LocalWeightFactor multiplies the weight of an endpoint in the client's zone when
// Config.ExtEndpointZoneWeights is set.
const LocalWeightFactor = 10

// Prev is a view computed before for the same client, and the set it was computed from:
// View takes over its endpoints for the endpoints of the set that did not change.
type Prev struct {
	Set, View *snapshot.AddressSet
}

// View returns what a client sees of set, as Linkerd's filtered listener computes it:
//
//   - A Service with internalTrafficPolicy Local (set.LocalTrafficPolicy): only the
//     endpoints of pods on the client's node.
//   - Otherwise, when every endpoint has zone hints: those hinted for the client's zone, or
//     all of them when none is.
//   - Then a pod with an endpoint of each family keeps one: its IPv6 address when
//     cfg.EnableIPv6, else its IPv4 address.
//   - Then, when the client's zone is known, an endpoint with a zone gets zone_locality local
//     or remote (and, local with cfg.ExtEndpointZoneWeights, LocalWeightFactor times its
//     weight); every other keeps "unknown".
//
// It returns set itself when the client sees it as it is (a client without locality, for
// most sets), and otherwise a new set that shares set's endpoints except the relabelled ones;
// those are taken over from prev.View when their endpoint of prev.Set is the same. Neither
// set nor prev is modified.
func View(cfg Config, set *snapshot.AddressSet, c Client, prev *Prev) *snapshot.AddressSet {
	if set == nil || len(set.Endpoints) == 0 {
		return set
	}
	keep := dropFamilyTwins(cfg, set, candidates(set, c))
	relabel := c.Zone != ""
	if keep == nil && !relabel {
		return set
	}
	out := &snapshot.AddressSet{Exists: set.Exists, Labels: set.Labels, LocalTrafficPolicy: set.LocalTrafficPolicy,
		Endpoints: make([]*snapshot.Endpoint, 0, len(set.Endpoints))}
	changed := false
	var b batch
	for i, e := range set.Endpoints {
		if keep != nil && !keep[i] {
			changed = true
			continue
		}
		if relabel {
			if ne := localize(cfg, e, c.Zone, prev, &b); ne != e {
				e, changed = ne, true
			}
		}
		out.Endpoints = append(out.Endpoints, e) // in set's order: sorted
	}
	if !changed {
		return set
	}
	return out
}

// candidates returns which of set's endpoints (by index) the traffic policy and the zone
// hints keep for c, or nil when they keep every one.
func candidates(set *snapshot.AddressSet, c Client) []bool {
	if set.LocalTrafficPolicy {
		keep := make([]bool, len(set.Endpoints))
		for i, e := range set.Endpoints {
			keep[i] = e.PodName() != "" && e.NodeName() == c.Node
		}
		return keep
	}
	for _, e := range set.Endpoints {
		if len(e.ForZones()) == 0 {
			return nil // an endpoint without hints turns zone filtering off
		}
	}
	keep := make([]bool, len(set.Endpoints))
	any := false
	for i, e := range set.Endpoints {
		if slices.Contains(e.ForZones(), c.Zone) {
			keep[i], any = true, true
		}
	}
	if !any {
		return nil // no endpoint for the client's zone: all of them
	}
	return keep
}

// dropFamilyTwins returns keep (by index into set.Endpoints; nil: every address is kept)
// without the address of the family not preferred of each pod that has a kept address of
// both families. It changes keep in place, or makes it when it was nil and an address goes.
func dropFamilyTwins(cfg Config, set *snapshot.AddressSet, keep []bool) []bool {
	v4, v6 := false, false
	for _, e := range set.Endpoints {
		if e.PodName() != "" {
			v4, v6 = v4 || e.Addr.Addr().Is4(), v6 || e.Addr.Addr().Is6()
		}
	}
	if !v4 || !v6 {
		return keep // one family: no pod has two
	}
	type pod struct{ ns, name string }
	var families map[pod]uint8 // bit 1: an IPv4 address kept, bit 2: an IPv6 one
	kept := func(i int) bool { return keep == nil || keep[i] }
	for i, e := range set.Endpoints {
		if e.PodName() == "" || !kept(i) {
			continue
		}
		if families == nil {
			families = map[pod]uint8{}
		}
		bit := uint8(1)
		if e.Addr.Addr().Is6() {
			bit = 2
		}
		families[pod{e.PodNamespace(), e.PodName()}] |= bit
	}
	for i, e := range set.Endpoints {
		if e.PodName() == "" || !kept(i) || families[pod{e.PodNamespace(), e.PodName()}] != 3 || e.Addr.Addr().Is6() == cfg.EnableIPv6 {
			continue
		}
		if keep == nil {
			keep = make([]bool, len(set.Endpoints))
			for j := range keep {
				keep[j] = true
			}
		}
		keep[i] = false
	}
	return keep
}

// localize returns e as a client in zone sees it: zone_locality local or remote when e has a
// zone, with the local weight. It returns e itself when nothing changes, and the endpoint of
// prev.View when prev.Set had e itself there.
func localize(cfg Config, e *snapshot.Endpoint, zone string, prev *Prev, b *batch) *snapshot.Endpoint {
	ez := e.Label(LabelKeyZone)
	if ez == "" {
		return e
	}
	if prev != nil && prev.Set != nil && prev.View != nil && prev.Set.Lookup(e.Addr) == e {
		if pe := prev.View.Lookup(e.Addr); pe != nil {
			return pe
		}
	}
	locality, weight := ZoneRemote, e.Weight
	if ez == zone {
		locality = ZoneLocal
		if cfg.ExtEndpointZoneWeights {
			weight *= LocalWeightFactor
		}
	}
	ne := b.endpoint()
	*ne = *e
	ne.Weight = weight
	ne.Labels = b.localized(e.Labels, locality, func() []snapshot.Label {
		labels := b.scratch[:0]
		for _, l := range e.Labels {
			if l.Key == LabelKeyZoneLocality {
				l.Value = locality
			}
			labels = append(labels, l)
		}
		b.scratch = labels
		return internLabels(labels)
	})
	return ne
}
