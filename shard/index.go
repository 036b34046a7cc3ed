package shard

import (
	"context"
	"slices"
	"strings"
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

// ServiceKey names a Service.
type ServiceKey struct{ Namespace, Name string }

func (k ServiceKey) String() string { return k.Namespace + "/" + k.Name }

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
}

// OwnsFunc reports whether this replica owns a service. It must be cheap and safe for
// concurrent use (the ring's Owns is lock-free).
type OwnsFunc func(ServiceKey) bool

// Index keeps the inputs of the services this replica owns and keeps their snapshots current.
// It implements source.Handler: callbacks store the object and enqueue the service for one of
// the workers, and never block.
type Index struct {
	cfg   Config
	log   *zap.Logger
	store *snapshot.Store
	m     *metrics
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

	queue workqueue.TypedInterface[ServiceKey]
}

type svcRef struct {
	key   ServiceKey
	count int32 // slices of key that reference the pod
}

var _ source.Handler = (*Index)(nil)

// NewIndex returns an index publishing to store, looking pods up with pods (the source keeps
// them). Run its workers with Run.
func NewIndex(cfg Config, store *snapshot.Store, pods translator.PodLookup, m *metrics, log *zap.Logger) *Index {
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
	k := ServiceKey{svc.Namespace, svc.Name}
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
		s.svc = translator.SlimService(svc)
	}
	s.mu.Unlock()
	x.queue.Add(k)
}

// OnEndpointSlice implements source.Handler.
func (x *Index) OnEndpointSlice(es *discoveryv1.EndpointSlice, deleted bool) {
	name := es.Labels[discoveryv1.LabelServiceName]
	if name == "" {
		return
	}
	k := ServiceKey{es.Namespace, name}
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
		next = translator.SlimEndpointSlice(es)
		s.slices[es.Name] = next
	}
	x.updateRefs(k, old, next)
	s.mu.Unlock()
	x.queue.Add(k)
}

// OnPod implements source.Handler: the services whose slices name the pod are recomputed (the
// pod itself stays with the source).
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
		x.queue.Add(k)
	}
}

func slicePods(es *discoveryv1.EndpointSlice) []podKey {
	if es == nil {
		return nil
	}
	var out []podKey
	for i := range es.Endpoints {
		if r := es.Endpoints[i].TargetRef; r != nil && r.Kind == "Pod" {
			ns := r.Namespace
			if ns == "" {
				ns = es.Namespace
			}
			out = append(out, podKey{ns, r.Name})
		}
	}
	return out
}

func (x *Index) updateRefs(k ServiceKey, old, next *discoveryv1.EndpointSlice) {
	x.refMu.Lock()
	defer x.refMu.Unlock()
	for _, pk := range slicePods(old) {
		refs := x.podRefs[pk]
		for i := range refs {
			if refs[i].key == k {
				refs[i].count--
				if refs[i].count == 0 {
					refs = append(refs[:i], refs[i+1:]...)
				}
				break
			}
		}
		if len(refs) == 0 {
			delete(x.podRefs, pk)
		} else {
			x.podRefs[pk] = refs
		}
	}
	for _, pk := range slicePods(next) {
		refs := x.podRefs[pk]
		found := false
		for i := range refs {
			if refs[i].key == k {
				refs[i].count++
				found = true
				break
			}
		}
		if !found {
			refs = append(refs, svcRef{key: k, count: 1})
		}
		x.podRefs[pk] = refs
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

// publishLocked computes and publishes port p of s; s.mu is held.
func (x *Index) publishLocked(k ServiceKey, s *service, p uint32) {
	slices := make([]*discoveryv1.EndpointSlice, 0, len(s.slices))
	for _, es := range s.slices {
		slices = append(slices, es)
	}
	set := translator.AddressSet(x.cfg.Translator, s.svc, p, slices, x.pods)
	x.store.Publish(snapshot.Key{Namespace: k.Namespace, Name: k.Name, Port: p}, set)
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

// Services returns the keys of the services held whose Service object is known, sorted.
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
	slices.SortFunc(out, func(a, b ServiceKey) int { return strings.Compare(a.String(), b.String()) })
	return out
}

// KnownServices returns the "namespace/name" of every Service the source has shown.
func (x *Index) KnownServices() []string {
	out := make([]string, 0, x.known.Size())
	x.known.Range(func(k ServiceKey, _ struct{}) bool {
		out = append(out, k.String())
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
		s.mu.Unlock()
		x.queue.Add(k)
		return true
	})
	return n
}
