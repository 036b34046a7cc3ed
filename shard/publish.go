package shard

import (
	"cmp"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"

	"github.com/meridian-mesh/meridian/snapshot"
	"github.com/meridian-mesh/meridian/translator"
)

type podKey struct{ Namespace, Name string }

// service holds the inputs of one service. mu guards every field and serialises the
// recomputation and publication of the service's snapshots.
type service struct {
	mu     sync.Mutex
	svc    *corev1.Service
	slices map[string]*translator.EndpointSlice
	// ports are the ports with snapshots in the store: the ports of the Service spec, which
	// are always computed, and those streams watch.
	ports map[uint32]*portState
	// stale names the pods changed since the last recompute: their endpoints are translated
	// again, while the others are taken over from the published sets. full (set when the
	// Service or its namespace's Servers change, or its inputs are dropped) translates every
	// endpoint again.
	stale map[podKey]struct{}
	full  bool
	// gen counts the changes of the inputs its address sets are computed from (its Service,
	// slices, pods, its namespace's Servers, node zones), each made with s.mu held; a port's
	// gen says which it was last computed from (Watch).
	gen uint64
	// profiles are the ServiceProfiles named by the Service's fully qualified name, by their
	// namespace: the Service's own, and clients' (a client's overrides the Service's).
	profiles map[string]*translator.ServiceProfile
	// dead is set by forgetLocked as the service leaves the index's map: a caller that
	// found it there before and locks it after looks it up again (Index.lockLive), or what it
	// stores would be lost with it.
	dead bool
}

// portState is one port of a service: its address set before any client's view, and the
// views streams watch.
type portState struct {
	// base is the set computed last (nil before the first), which the next computation
	// takes endpoints over from and every view is computed from.
	base *snapshot.AddressSet
	// views counts the streams of each view (a client's node; "" for a client without
	// locality). The view "" of a computed port is always published.
	views map[string]int
	// rezoned names the views whose node changed zone (OnNode) since they were last
	// computed: those are computed whole, not from their published sets, whose endpoints
	// carry the old zone's locality and weights. nil almost always.
	rezoned map[string]struct{}
	// gen is the service's gen its views were last computed from.
	gen uint64
}

func (ps *portState) watched() int {
	n := 0
	for _, c := range ps.views {
		n += c
	}
	return n
}

// watched returns the number of streams of every port of s; s.mu is held.
func (s *service) watched() int {
	n := 0
	for _, ps := range s.ports {
		n += ps.watched()
	}
	return n
}

// port returns the state of port p, creating it; s.mu is held.
func (s *service) port(p uint32) *portState {
	ps := s.ports[p]
	if ps == nil {
		ps = &portState{views: map[string]int{}}
		s.ports[p] = ps
	}
	return ps
}

// reuse returns what computing a port may take over from prev, the set computed before;
// s.mu is held.
func (s *service) reuse(prev *snapshot.AddressSet) translator.Reuse {
	if s.full || prev == nil {
		return translator.Reuse{}
	}
	r := translator.Reuse{Prev: prev}
	if len(s.stale) > 0 {
		r.Stale = func(ns, name string) bool {
			_, ok := s.stale[podKey{ns, name}]
			return ok
		}
	}
	return r
}

func viewKey(k ServiceKey, port uint32, view string) snapshot.Key {
	return snapshot.Key{Namespace: k.Namespace, Name: k.Name, Port: port, View: view}
}

// recompute publishes the current address set of every port of k that is declared or watched,
// in every view streams watch, and forgets the service when it is gone and nobody watches it.
func (x *Index) recompute(k ServiceKey) {
	s, ok := x.services.Load(k)
	if !ok {
		return
	}
	x.m.recomputes.Inc()
	s.mu.Lock()
	defer s.mu.Unlock()
	if !x.Owns(k) {
		// Not ours any more: publish nothing (the streams still holding it move to the new
		// owner and release it), and forget it once nobody holds it and DropUnowned has let
		// go of its slices (with their pod references and sliceSvc entries, which forgetting
		// it here would leave behind for good).
		if s.watched() == 0 && len(s.slices) == 0 {
			x.forgetLocked(k, s)
		}
		return
	}
	declared := map[uint32]bool{}
	if s.svc != nil {
		for _, p := range s.svc.Spec.Ports {
			declared[uint32(p.Port)] = true
			s.port(uint32(p.Port))
		}
	}
	for p, ps := range s.ports {
		// A view nobody watches any more is released, and so is a port neither declared nor
		// watched (a stream for an arbitrary port must not leave a snapshot behind); Release
		// refuses while a stream still holds it.
		for v, n := range ps.views {
			if n <= 0 && (v != "" || !declared[p]) && x.store.Release(viewKey(k, p, v)) {
				delete(ps.views, v)
			}
		}
		if !declared[p] && ps.watched() == 0 && x.store.Release(viewKey(k, p, "")) {
			delete(s.ports, p)
			continue
		}
		x.publishLocked(k, s, p)
	}
	s.stale, s.full = nil, false
	if s.svc == nil && len(s.slices) == 0 && len(s.profiles) == 0 && s.watched() == 0 {
		x.forgetLocked(k, s)
	}
}

// forgetLocked releases the snapshots of s and removes it; s.mu is held.
func (x *Index) forgetLocked(k ServiceKey, s *service) {
	for p, ps := range s.ports {
		x.store.Release(viewKey(k, p, ""))
		for v := range ps.views {
			x.store.Release(viewKey(k, p, v))
		}
	}
	s.ports = map[uint32]*portState{}
	s.dead = true
	x.services.Delete(k)
}

// publishLocked computes port p of s, taking the endpoints that did not change over from the
// set computed before, and publishes it in the view "" and in every view streams watch. The
// views of clients in one zone are the same unless the Service keeps traffic on the
// client's node, so they are computed once per zone and share one set, and the store
// compares and diffs them once (snapshot.DiffCache): a change costs a replica one view per
// zone, not one per node; s.mu is held.
func (x *Index) publishLocked(k ServiceKey, s *service, p uint32) {
	ps := s.port(p)
	base := translator.AddressSetReusing(x.cfg.Translator, x.inputsLocked(k, s), p, s.reuse(ps.base))
	// The views published already go first, so that an unchanged one gives its set to the
	// views of its zone that are new.
	views := make([]string, 0, len(ps.views)+1)
	views = append(views, "")
	for v := range ps.views {
		if v != "" {
			views = append(views, v)
		}
	}
	current := make(map[string]*snapshot.Snapshot, len(views))
	for _, v := range views {
		current[v] = x.store.Load(viewKey(k, p, v))
	}
	slices.SortStableFunc(views, func(a, b string) int {
		return cmp.Compare(b2i(current[a] == nil), b2i(current[b] == nil))
	})
	byZone := map[string]*snapshot.AddressSet{}
	caches := map[string]*snapshot.DiffCache{}
	for _, view := range views {
		c := translator.Client{Node: view, Zone: x.cluster.zone(view)}
		set, shared := byZone[c.Zone]
		if !shared || base.LocalTrafficPolicy {
			var prev *translator.Prev
			cur := current[view]
			if _, rezoned := ps.rezoned[view]; cur != nil && ps.base != nil && !rezoned {
				prev = &translator.Prev{Set: ps.base, View: cur.Set}
			}
			set = translator.View(x.cfg.Translator, base, c, prev)
			if cur != nil && cur.Set.Equal(set) {
				set = cur.Set // unchanged: the other views of the zone share the published one
			}
			byZone[c.Zone] = set
		}
		// The views of a zone replace one set by one set: the store compares and diffs them once.
		var dc *snapshot.DiffCache
		if !base.LocalTrafficPolicy {
			if dc = caches[c.Zone]; dc == nil {
				dc = &snapshot.DiffCache{}
				caches[c.Zone] = dc
			}
		}
		x.store.PublishShared(viewKey(k, p, view), set, dc)
	}
	ps.base, ps.rezoned, ps.gen = base, nil, s.gen
}

// inputsLocked returns what the sets of service k are translated from: its Service, its
// slices, the pods, its namespace's Servers. s.mu is held.
func (x *Index) inputsLocked(k ServiceKey, s *service) translator.Inputs {
	sl := make([]*translator.EndpointSlice, 0, len(s.slices))
	for _, es := range s.slices {
		sl = append(sl, es)
	}
	return translator.Inputs{Service: s.svc, Slices: sl, Pods: x.pods, Servers: x.cluster.serversOf(k.Namespace)}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Watch subscribes to port of service k as a client on node (a view; "" for a client
// without locality) sees it, computing its snapshot first if no one has yet, so that the
// subscription's first delta is the current state. It returns nil when the Service is
// unknown. The caller must call the returned release when done.
func (x *Index) Watch(k ServiceKey, port uint32, node string) (*snapshot.Subscription, func()) {
	s, ok := x.services.Load(k)
	if !ok {
		return nil, nil
	}
	s.mu.Lock()
	if s.dead { // forgotten since the map answered: a new one may hold the Service by now
		s.mu.Unlock()
		return x.Watch(k, port, node)
	}
	if s.svc == nil || !x.Owns(k) {
		s.mu.Unlock()
		return nil, nil
	}
	ps := s.port(port)
	ps.views[node]++
	key := viewKey(k, port, node)
	if x.store.Load(key) == nil || ps.gen != s.gen {
		// Computed now when no one has yet, or when the inputs changed since the port was
		// last computed (the change waits for its recompute): the snapshot published is
		// older than what the index holds (a replica's first load publishes a Service before
		// its slices arrive), and a new stream must not be told first that its service has no
		// endpoints. Once per change: the streams after it find the port current.
		x.publishLocked(k, s, port)
	}
	sub := x.store.Subscribe(key, x.cfg.QueueCapacity)
	s.mu.Unlock()
	var once sync.Once
	return sub, func() {
		once.Do(func() {
			sub.Close()
			s.mu.Lock()
			last := ps.views[node] <= 1
			if last {
				ps.views[node] = 0 // recompute releases it
			} else {
				ps.views[node]--
			}
			s.mu.Unlock()
			if last {
				// Recompute releases the view, and forgets a deleted service nobody watches.
				// While others watch it, there is nothing to do: a recompute would translate
				// the service again for nothing, once for every client that goes.
				x.queue.Add(k)
			}
		})
	}
}
