package shard

import (
	"context"
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/puzpuzpuz/xsync/v3"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/client-go/util/workqueue"

	"github.com/meridian-mesh/meridian/shard/source"
	"github.com/meridian-mesh/meridian/snapshot"
	"github.com/meridian-mesh/meridian/translator"
)

type podKey struct{ Namespace, Name string }

// service holds the inputs of one service. mu guards every field and serialises the
// recomputation and publication of the service's snapshots.
type service struct {
	mu     sync.Mutex
	svc    *corev1.Service
	slices map[string]*discoveryv1.EndpointSlice
	// watched counts the streams per port; ports of the Service spec are always computed.
	watched map[uint32]int
	// published lists the ports with a snapshot in the store.
	published map[uint32]struct{}
	// stale names the pods changed since the last recompute: their endpoints are translated
	// again, while the others are taken over from the published sets. full (set when the
	// Service changes, or its inputs are dropped) translates every endpoint again.
	stale map[podKey]struct{}
	full  bool
}

// reuse returns what publishing port p may take over from the snapshot published before;
// s.mu is held.
func (s *service) reuse(prev *snapshot.Snapshot) translator.Reuse {
	if s.full || prev == nil {
		return translator.Reuse{}
	}
	r := translator.Reuse{Prev: prev.Set}
	if len(s.stale) > 0 {
		r.Stale = func(ns, name string) bool {
			_, ok := s.stale[podKey{ns, name}]
			return ok
		}
	}
	return r
}

// OwnsFunc reports whether this replica owns a service. It must be cheap and safe for
// concurrent use (the ring's OwnsHash is lock-free and does not allocate).
type OwnsFunc func(ServiceKey) bool

// Index keeps the inputs of the services this replica owns and keeps their snapshots current.
// It implements source.Handler: callbacks store the object and enqueue the service for one of
// the workers, and never block.
type Index struct {
	cfg   Config
	log   *zap.Logger
	store *snapshot.Store
	m     *replicaMetrics
	owns  atomic.Pointer[OwnsFunc]

	services *xsync.MapOf[ServiceKey, *service]
	// known holds the key of every Service the source has shown, owned or not (a few bytes
	// each), so that the ring's shares can be reported.
	known *xsync.MapOf[ServiceKey, struct{}]
	pods  translator.PodLookup

	// refMu guards podRefs: which services' slices name each pod, so that a pod change
	// recomputes exactly those services.
	refMu   sync.Mutex
	podRefs map[podKey][]svcRef
	// refsPeak is the most entries podRefs has held since it was made: a Go map keeps the
	// room of its largest size, so when a ring change leaves it far smaller it is copied.
	refsPeak int

	queue workqueue.TypedInterface[ServiceKey]
}

type svcRef struct {
	key   ServiceKey
	count int32 // slices of key that reference the pod
}

var (
	_ source.Handler       = (*Index)(nil)
	_ source.ServiceFilter = (*Index)(nil)
)

// NewIndex returns an index publishing to store, looking pods up with pods (the source keeps
// them). Run its workers with Run.
func NewIndex(cfg Config, store *snapshot.Store, pods translator.PodLookup, m *replicaMetrics, log *zap.Logger) *Index {
	x := &Index{
		cfg:      cfg,
		log:      log,
		store:    store,
		m:        m,
		services: xsync.NewMapOf[ServiceKey, *service](),
		known:    xsync.NewMapOf[ServiceKey, struct{}](),
		pods:     pods,
		podRefs:  make(map[podKey][]svcRef),
		queue:    workqueue.NewTyped[ServiceKey](),
	}
	all := OwnsFunc(func(ServiceKey) bool { return true })
	x.owns.Store(&all)
	return x
}

// SetOwns replaces the ownership filter (the ring calls it on every membership change).
func (x *Index) SetOwns(f OwnsFunc) { x.owns.Store(&f) }

// Owns reports whether the replica owns k now.
func (x *Index) Owns(k ServiceKey) bool { return (*x.owns.Load())(k) }

// WantsService implements source.ServiceFilter: the index keeps the slices of the services
// the replica owns (OnEndpointSlice drops the others), and the ring follower replays the
// source after SetOwns whenever the replica gains services.
func (x *Index) WantsService(namespace, name string) bool {
	return x.Owns(NewServiceKey(namespace, name))
}

// Run runs cfg.Workers workers until ctx ends.
func (x *Index) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	for range max(1, x.cfg.Workers) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for x.processNext() {
			}
		}()
	}
	<-ctx.Done()
	x.queue.ShutDown()
	wg.Wait()
	return nil
}

func (x *Index) processNext() bool {
	k, quit := x.queue.Get()
	if quit {
		return false
	}
	defer x.queue.Done(k)
	x.recompute(k)
	return true
}

func (x *Index) getOrCreate(k ServiceKey) *service {
	s, _ := x.services.LoadOrCompute(k, func() *service {
		return &service{slices: map[string]*discoveryv1.EndpointSlice{}, watched: map[uint32]int{}, published: map[uint32]struct{}{}}
	})
	return s
}

// OnService implements source.Handler.
func (x *Index) OnService(svc *corev1.Service, deleted bool) {
	k := NewServiceKey(svc.Namespace, svc.Name)
	if deleted {
		x.known.Delete(k)
	} else {
		x.known.Store(k, struct{}{})
	}
	if !x.Owns(k) {
		return
	}
	s := x.getOrCreate(k)
	s.mu.Lock()
	if deleted {
		s.svc = nil
	} else {
		s.svc = translator.ProjectService(svc) // a source that delivers projections is not copied again
	}
	s.full = true
	s.mu.Unlock()
	x.queue.Add(k)
}

// OnEndpointSlice implements source.Handler.
func (x *Index) OnEndpointSlice(es *discoveryv1.EndpointSlice, deleted bool) {
	name := es.Labels[discoveryv1.LabelServiceName]
	if name == "" {
		return
	}
	k := NewServiceKey(es.Namespace, name)
	if !x.Owns(k) {
		return
	}
	s := x.getOrCreate(k)
	s.mu.Lock()
	old := s.slices[es.Name]
	var next *discoveryv1.EndpointSlice
	if deleted {
		delete(s.slices, es.Name)
	} else {
		next = translator.ProjectEndpointSlice(es) // a source that delivers projections is not copied again
		s.slices[es.Name] = next
	}
	x.updateRefs(k, old, next)
	s.mu.Unlock()
	x.queue.Add(k)
}

// OnPod implements source.Handler: the services whose slices name the pod translate its
// endpoints again (the pod itself stays with the source).
func (x *Index) OnPod(pod *corev1.Pod, _ bool) {
	pk := podKey{pod.Namespace, pod.Name}
	x.refMu.Lock()
	refs := x.podRefs[pk]
	keys := make([]ServiceKey, len(refs))
	for i, r := range refs {
		keys[i] = r.key
	}
	x.refMu.Unlock()
	for _, k := range keys {
		s, ok := x.services.Load(k)
		if !ok {
			continue
		}
		s.mu.Lock()
		if s.stale == nil {
			s.stale = map[podKey]struct{}{}
		}
		s.stale[pk] = struct{}{}
		s.mu.Unlock()
		x.queue.Add(k)
	}
}

// slicePod returns the pod endpoint i of es names, if any.
func slicePod(es *discoveryv1.EndpointSlice, i int) (podKey, bool) {
	r := es.Endpoints[i].TargetRef
	if r == nil || r.Kind != "Pod" {
		return podKey{}, false
	}
	ns := r.Namespace
	if ns == "" {
		ns = es.Namespace
	}
	return podKey{ns, r.Name}, true
}

// updateRefs moves k's references from the pods of old to those of next (either may be nil).
// A slice update mostly keeps its endpoints in order, changing, inserting or removing one or
// a few, so the two lists are walked side by side and only the pods where they differ are
// touched (one skipped insertion or removal is recognised as such): a change of one endpoint
// costs one or two reference updates, not one per endpoint.
func (x *Index) updateRefs(k ServiceKey, old, next *discoveryv1.EndpointSlice) {
	at := func(es *discoveryv1.EndpointSlice, i int) (podKey, bool, bool) {
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

// recompute publishes the current address set of every port of k that is declared or watched,
// and forgets the service when it is gone and nobody watches it.
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
		// owner and release it), and forget it once nobody holds it.
		if len(s.watched) == 0 {
			x.forgetLocked(k, s)
		}
		return
	}
	ports := map[uint32]struct{}{}
	if s.svc != nil {
		for _, p := range s.svc.Spec.Ports {
			ports[uint32(p.Port)] = struct{}{}
		}
	}
	for p := range s.watched {
		ports[p] = struct{}{}
	}
	// A port neither declared nor watched any more is released (a stream for an arbitrary
	// port must not leave a snapshot behind); Release refuses while a stream still holds it.
	for p := range s.published {
		if _, keep := ports[p]; !keep {
			if x.store.Release(snapshot.Key{Namespace: k.Namespace, Name: k.Name, Port: p}) {
				delete(s.published, p)
			} else {
				ports[p] = struct{}{}
			}
		}
	}
	for p := range ports {
		x.publishLocked(k, s, p)
	}
	s.stale, s.full = nil, false
	if s.svc == nil && len(s.slices) == 0 && len(s.watched) == 0 {
		x.forgetLocked(k, s)
	}
}

// forgetLocked releases the snapshots of s and removes it; s.mu is held.
func (x *Index) forgetLocked(k ServiceKey, s *service) {
	for p := range s.published {
		x.store.Release(snapshot.Key{Namespace: k.Namespace, Name: k.Name, Port: p})
	}
	s.published = map[uint32]struct{}{}
	x.services.Delete(k)
}

// publishLocked computes and publishes port p of s, taking the endpoints that did not change
// over from its current snapshot; s.mu is held.
func (x *Index) publishLocked(k ServiceKey, s *service, p uint32) {
	slices := make([]*discoveryv1.EndpointSlice, 0, len(s.slices))
	for _, es := range s.slices {
		slices = append(slices, es)
	}
	key := snapshot.Key{Namespace: k.Namespace, Name: k.Name, Port: p}
	set := translator.AddressSetReusing(x.cfg.Translator, s.svc, p, slices, x.pods, s.reuse(x.store.Load(key)))
	x.store.Publish(key, set)
	s.published[p] = struct{}{}
}

// Service returns the Service named by k, or nil when it is unknown. The returned object must
// not be modified.
func (x *Index) Service(k ServiceKey) *corev1.Service {
	s, ok := x.services.Load(k)
	if !ok {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.svc
}

// Watch subscribes to port of service k, computing its snapshot first if no one has yet, so
// that the subscription's first delta is the current state. It returns nil when the Service
// is unknown. The caller must call the returned release when done.
func (x *Index) Watch(k ServiceKey, port uint32) (*snapshot.Subscription, func()) {
	s, ok := x.services.Load(k)
	if !ok {
		return nil, nil
	}
	s.mu.Lock()
	if s.svc == nil || !x.Owns(k) {
		s.mu.Unlock()
		return nil, nil
	}
	s.watched[port]++
	key := snapshot.Key{Namespace: k.Namespace, Name: k.Name, Port: port}
	if _, ok := s.published[port]; !ok || x.store.Load(key) == nil {
		x.publishLocked(k, s, port)
	}
	sub := x.store.Subscribe(key, x.cfg.QueueCapacity)
	s.mu.Unlock()
	var once sync.Once
	return sub, func() {
		once.Do(func() {
			sub.Close()
			s.mu.Lock()
			s.watched[port]--
			if s.watched[port] <= 0 {
				delete(s.watched, port)
			}
			s.mu.Unlock()
			x.queue.Add(k) // lets recompute forget a deleted service nobody watches
		})
	}
}

// Len returns the number of services held.
func (x *Index) Len() int { return x.services.Size() }

// Services returns the keys of the services held whose Service object is known, sorted by
// namespace and name.
func (x *Index) Services() []ServiceKey {
	var out []ServiceKey
	x.services.Range(func(k ServiceKey, s *service) bool {
		s.mu.Lock()
		ok := s.svc != nil
		s.mu.Unlock()
		if ok {
			out = append(out, k)
		}
		return true
	})
	slices.SortFunc(out, compareKeys)
	return out
}

// KnownServices returns the key of every Service the source has shown, owned or not.
func (x *Index) KnownServices() []ServiceKey {
	out := make([]ServiceKey, 0, x.known.Size())
	x.known.Range(func(k ServiceKey, _ struct{}) bool {
		out = append(out, k)
		return true
	})
	return out
}

// DropUnowned forgets the inputs of every service the replica no longer owns. Their snapshots
// stay while streams hold them (those streams move to the new owner and then release them);
// the rest are released now. It returns the number of services dropped.
func (x *Index) DropUnowned() int {
	n := 0
	x.services.Range(func(k ServiceKey, s *service) bool {
		if x.Owns(k) {
			return true
		}
		n++
		s.mu.Lock()
		for _, es := range s.slices {
			x.updateRefs(k, es, nil)
		}
		s.svc, s.slices = nil, map[string]*discoveryv1.EndpointSlice{}
		s.stale, s.full = nil, true
		s.mu.Unlock()
		x.queue.Add(k)
		return true
	})
	x.compactRefs()
	return n
}
