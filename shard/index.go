package shard

import (
	"context"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/puzpuzpuz/xsync/v3"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meridian-mesh/meridian/internal/run"
	"github.com/meridian-mesh/meridian/shard/source"
	"github.com/meridian-mesh/meridian/snapshot"
	"github.com/meridian-mesh/meridian/translator"
)

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
	// shardSel is the API server's shard selector of the namespaces the replica owns (a ring
	// keyed by namespace), "" for every namespace.
	shardSel atomic.Pointer[string]

	services *xsync.MapOf[ServiceKey, *service]
	pods     translator.PodLookup
	// podLoader, when the source keeps only the pods the index wants (WantsPod), is told
	// which pods the index starts and stops needing for its slices (set before Run).
	podLoader source.PodLoader
	// ips resolves the addresses of every Service and pod (GetProfile by IP); cluster holds
	// the zones of Nodes and the Servers of every namespace.
	ips     *ipIndex
	cluster *clusterState
	// changed wakes the profile streams of a service when its Service changes.
	changed notifier[ServiceKey]

	// sliceMu guards sliceSvc: the service each slice the index holds is held under, so that
	// a slice whose kubernetes.io/service-name label changes leaves its old service. Sources
	// deliver a slice only as it is now: an owned slice moved to another service arrives as
	// the new service's, and one moved to a service the replica does not want as the
	// deletion of a placeholder naming that service (source.IsPlaceholder).
	sliceMu  sync.Mutex
	sliceSvc map[sliceKey]ServiceKey
	// slicesPeak is the most entries sliceSvc has held since it was made (compacted as
	// podRefs is, compactRefs).
	slicesPeak int

	// refMu guards podRefs: which services' slices name each pod, so that a pod change
	// recomputes exactly those services.
	refMu   sync.Mutex
	podRefs map[podKey][]svcRef
	// refsPeak is the most entries podRefs has held since it was made: a Go map keeps the
	// room of its largest size, so when a ring change leaves it far smaller it is copied.
	refsPeak int

	queue *keyQueue[ServiceKey]
	// busy counts the services being recomputed (settle waits for none).
	busy atomic.Int32
}

// sliceKey is an EndpointSlice's namespace and name.
type sliceKey = podKey

type svcRef struct {
	key   ServiceKey
	count int32 // slices of key that reference the pod
}

var (
	_ source.Handler        = (*Index)(nil)
	_ source.ServiceFilter  = (*Index)(nil)
	_ source.NodeHandler    = (*Index)(nil)
	_ source.ServerHandler  = (*Index)(nil)
	_ source.ProfileHandler = (*Index)(nil)
	_ source.ProfileFilter  = (*Index)(nil)
	_ source.PodFilter      = (*Index)(nil)

	_ source.NamespaceSharder = (*Index)(nil)
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
		pods:     pods,
		ips:      newIPIndex(),
		cluster:  newClusterState(log),
		podRefs:  make(map[podKey][]svcRef),
		sliceSvc: make(map[sliceKey]ServiceKey),
		queue:    newKeyQueue[ServiceKey](),
	}
	all := OwnsFunc(func(ServiceKey) bool { return true })
	x.owns.Store(&all)
	return x
}

// SetOwns replaces the ownership filter (the ring calls it on every membership change).
func (x *Index) SetOwns(f OwnsFunc) { x.owns.Store(&f) }

// SetShardSelector replaces the shard selector of the namespaces the replica owns (the ring
// follower sets it with the filter, in a ring keyed by namespace).
func (x *Index) SetShardSelector(s string) { x.shardSel.Store(&s) }

// ShardSelector implements source.NamespaceSharder: "" (every namespace) unless the ring is
// keyed by namespace.
func (x *Index) ShardSelector() string {
	if s := x.shardSel.Load(); s != nil {
		return *s
	}
	return ""
}

// Owns reports whether the replica owns k now.
func (x *Index) Owns(k ServiceKey) bool { return (*x.owns.Load())(k) }

// ownsIP reports whether the replica owns the address a now (ipKey), without building its key.
func (x *Index) ownsIP(a netip.Addr) bool { return x.Owns(ServiceKey{hash: ipHash(a)}) }

// WantsService implements source.ServiceFilter: the index keeps the slices of the services
// the replica owns (OnEndpointSlice drops the others), and the ring follower replays the
// source after SetOwns whenever the replica gains services.
func (x *Index) WantsService(namespace, name string) bool {
	return x.Owns(NewServiceKey(namespace, name))
}

// WantsPod implements source.PodFilter: the index needs the pods its slices name, and those
// with an address it owns in the ring (it answers GetProfile for them, ipIndex), or still
// holds: between a ring change's new filter and DropUnowned, the streams of an address the
// replica is losing are served here, and a pod the filter dropped would reach the index as
// deleted (its placeholder), taking the address away from them (ipIndex.setPod).
func (x *Index) WantsPod(namespace, name string, ips []netip.Addr) bool {
	return slices.ContainsFunc(ips, x.ownsIP) || x.named(namespace, name) || x.ips.holdsPod(podKey{namespace, name})
}

// SetPodLoader gives the index the source's PodLoader (before Run): the source keeps only
// the pods WantsPod admits, and is told when a slice starts or stops naming one.
func (x *Index) SetPodLoader(l source.PodLoader) { x.podLoader = l }

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
	if x.podLoader != nil {
		wg.Go(func() { x.askForMissingPods(ctx, missingPodsPeriod) })
	}
	<-ctx.Done()
	x.queue.ShutDown()
	wg.Wait()
	return nil
}

// missingPodsPeriod is how often the index asks its source again for the pods its slices
// name that the source does not have.
const missingPodsPeriod = 30 * time.Second

// askForMissingPods asks the source's PodLoader, every period until ctx ends, for each pod the
// index's slices name that the source does not have. It is the backstop of the source's reads:
// a source that keeps only the pods the index wants writes its cache beside its informer's,
// and a write may race one of the informer's (a relist's replacement of the whole cache above
// all), losing a pod that nothing would read again until it next changes. A pod that does
// not exist (a slice names a pod deleted since) costs one read a period.
func (x *Index) askForMissingPods(ctx context.Context, period time.Duration) {
	run.Every(ctx, period, func() {
		x.refMu.Lock()
		named := make([]podKey, 0, len(x.podRefs))
		for pk := range x.podRefs {
			named = append(named, pk)
		}
		x.refMu.Unlock()
		for _, pk := range named {
			if x.pods == nil || x.pods(pk.Namespace, pk.Name) == nil {
				x.podLoader.WantPod(pk.Namespace, pk.Name)
			}
		}
	})
}

func (x *Index) processNext() bool {
	k, quit := x.queue.Get()
	if quit {
		return false
	}
	x.busy.Add(1)
	defer x.busy.Add(-1)
	defer x.queue.Done(k)
	x.recompute(k)
	return true
}

// settle waits until no service is waiting to be recomputed or being recomputed, or ctx
// ends: what the index was handed is then published. The ring follower settles after loading
// a gained share, so that the streams moving in find its snapshots complete.
func (x *Index) settle(ctx context.Context) {
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for (x.queue.Len() > 0 || x.busy.Load() > 0) && ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
	}
}

// loaded reports whether the index holds an EndpointSlice of k and, when the source keeps
// only the pods the index needs (podLoader), the source has every pod those slices name.
func (x *Index) loaded(k ServiceKey) bool {
	s, ok := x.services.Load(k)
	if !ok {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.slices) == 0 {
		return false
	}
	if x.podLoader == nil || x.pods == nil {
		return true
	}
	for _, es := range s.slices {
		for i := range es.Endpoints {
			if pk, ok := slicePod(es, i); ok && x.pods(pk.Namespace, pk.Name) == nil {
				return false
			}
		}
	}
	return true
}

func (x *Index) getOrCreate(k ServiceKey) *service {
	s, _ := x.services.LoadOrCompute(k, func() *service {
		return &service{slices: map[string]*translator.EndpointSlice{}, ports: map[uint32]*portState{}}
	})
	return s
}

// lockLive returns the service k, created if need be, with s.mu held. One that recompute
// forgot (forgetLocked) between the map's answer and the lock is looked up again: what the
// caller stores in it would be lost with it.
func (x *Index) lockLive(k ServiceKey) *service {
	for {
		s := x.getOrCreate(k)
		s.mu.Lock()
		if !s.dead {
			return s
		}
		s.mu.Unlock()
	}
}

// OnService implements source.Handler.
func (x *Index) OnService(svc *corev1.Service, deleted bool) {
	k := NewServiceKey(svc.Namespace, svc.Name)
	x.ips.setService(k, svc, deleted) // every Service, owned or not: KnownServices
	if !x.Owns(k) || (!deleted && source.IsClusterIPsOnly(svc)) {
		// Of a Service a filtering source reduced (it was not owned when read), the index
		// keeps the cluster IPs only, even when it owns the service by now: the source
		// delivers the whole Service with the gained share (source.ShareLoader).
		return
	}
	s := x.lockLive(k)
	if deleted {
		s.svc = nil
	} else {
		s.svc = translator.ProjectService(svc) // a source that delivers projections is not copied again
	}
	s.full = true
	s.gen++
	s.mu.Unlock()
	x.queue.Add(k)
	x.changed.notify(k)
}

// profiled returns the service a ServiceProfile's name profiles, if it names one.
func (x *Index) profiled(name string) (ServiceKey, bool) {
	svc, ns, ok := translator.ProfiledService(name, x.cfg.Translator.ClusterDomain)
	if !ok {
		return ServiceKey{}, false
	}
	return NewServiceKey(ns, svc), true
}

// WantsProfile implements source.ProfileFilter: the index keeps the ServiceProfiles of the
// services the replica owns, in every namespace (the Service's and its clients').
func (x *Index) WantsProfile(_, name string) bool {
	k, ok := x.profiled(name)
	return ok && x.Owns(k)
}

// OnServiceProfile implements source.ProfileHandler: a ServiceProfile of a service the
// replica owns is recorded, and the service's profile streams are woken; the others are
// dropped. An invalid profile (Problem set) replaces no valid version of itself: the last
// good one stays in effect.
func (x *Index) OnServiceProfile(sp *translator.ServiceProfile, deleted bool) {
	k, ok := x.profiled(sp.Name)
	if !ok || !x.Owns(k) {
		return
	}
	s := x.lockLive(k)
	old := s.profiles[sp.Namespace]
	switch {
	case deleted:
		delete(s.profiles, sp.Namespace)
	case sp.Problem != "" && old != nil && old.Problem == "":
		x.log.Warn("invalid ServiceProfile update ignored; its last good version stays in effect",
			zap.String("profile", sp.Namespace+"/"+sp.Name), zap.String("problem", sp.Problem))
	default:
		if s.profiles == nil {
			s.profiles = map[string]*translator.ServiceProfile{}
		}
		s.profiles[sp.Namespace] = sp
	}
	s.mu.Unlock()
	x.queue.Add(k) // lets recompute forget a service whose last input this was
	x.changed.notify(k)
}

// Profile returns the ServiceProfile that applies to k for a client in namespace clientNS
// ("" when unknown), or nil: the client namespace's, else the Service namespace's, as
// Linkerd chooses (an invalid one counts as none). It must not be modified.
func (x *Index) Profile(k ServiceKey, clientNS string) *translator.ServiceProfile {
	s, ok := x.services.Load(k)
	if !ok {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ns := range [2]string{clientNS, k.Namespace} {
		if sp := s.profiles[ns]; ns != "" && sp != nil && sp.Problem == "" {
			return sp
		}
	}
	return nil
}

// OnNode implements source.NodeHandler: a Node's zone is recorded, and when it changes, the
// services whose streams see them from that node are computed again, that node's views whole
// (portState.rezoned).
func (x *Index) OnNode(n *metav1.PartialObjectMetadata, deleted bool) {
	if !x.cluster.setNode(n, deleted) {
		return
	}
	x.services.Range(func(k ServiceKey, s *service) bool {
		s.mu.Lock()
		seen := false
		for _, ps := range s.ports {
			if ps.views[n.Name] > 0 {
				seen = true
				if ps.rezoned == nil {
					ps.rezoned = map[string]struct{}{}
				}
				ps.rezoned[n.Name] = struct{}{}
			}
		}
		if seen {
			s.gen++
		}
		s.mu.Unlock()
		if seen {
			x.queue.Add(k)
		}
		return true
	})
}

// OnServer implements source.ServerHandler: the Server is recorded, the services of its
// namespace are translated again, and the pod-IP profile streams of the namespace are woken.
func (x *Index) OnServer(srv *translator.Server, deleted bool) {
	if !x.cluster.setServer(srv, deleted) {
		return
	}
	x.services.Range(func(k ServiceKey, s *service) bool {
		if k.Namespace == srv.Namespace {
			s.mu.Lock()
			s.full = true
			s.gen++
			s.mu.Unlock()
			x.queue.Add(k)
		}
		return true
	})
	x.cluster.nsWatchers.notify(srv.Namespace)
}

// OnEndpointSlice implements source.Handler. A slice is held under the service its
// kubernetes.io/service-name label names while the replica owns that service. When the label
// changes, the slice leaves the service it was held under: an update names the new service,
// and a filtering source delivers a slice moved to a service the replica does not want as
// the deletion of a placeholder (source.IsPlaceholder) naming that service. A placeholder
// naming the service the slice is held under, or an update of a slice of a service the
// replica no longer owns, is a ring change's, which DropUnowned follows once the streams
// moved: neither empties the service before then.
func (x *Index) OnEndpointSlice(es *translator.EndpointSlice, deleted bool) {
	sk := sliceKey{es.Namespace, es.Name}
	var k ServiceKey
	keep := false
	if !deleted && es.Service != "" {
		k = NewServiceKey(es.Namespace, es.Service)
		keep = x.Owns(k)
	}
	x.sliceMu.Lock()
	defer x.sliceMu.Unlock()
	prev, held := x.sliceSvc[sk]
	// A slice held under a service the replica no longer owns stays there, whatever the
	// event, until DropUnowned lets the service go: the ring follower swaps the view (which
	// moves the service's streams to its new owner) between the two, and a source that
	// restarts its watch on a ring change (a sharded watch, narrowed to the new share)
	// reports the slices it no longer receives as deletions in between. Applied, those
	// emptied the set that the service's streams were still served from.
	held = held && x.Owns(prev)
	// It leaves prev when its label names another service now, or when it is deleted (a
	// placeholder is not a deletion of the slice).
	leaves := held && (prev.Name != es.Service || deleted && !source.IsPlaceholder(es))
	if leaves && !keep {
		delete(x.sliceSvc, sk)
	}
	if keep {
		// Added before it leaves prev: a pod only this slice names keeps a reference
		// throughout (updateRefs would forget it, and then ask the source for it again).
		x.sliceSvc[sk] = k
		x.slicesPeak = max(x.slicesPeak, len(x.sliceSvc))
		x.setSlice(k, es.Name, es)
	}
	if leaves {
		x.setSlice(prev, es.Name, nil)
	}
}

// setSlice stores es as the slice name of the service k (nil: removes it) and queues k;
// sliceMu is held.
func (x *Index) setSlice(k ServiceKey, name string, es *translator.EndpointSlice) {
	s := x.lockLive(k)
	old := s.slices[name]
	if es == nil {
		delete(s.slices, name)
	} else {
		s.slices[name] = es
	}
	x.updateRefs(k, old, es)
	s.gen++
	s.mu.Unlock()
	x.queue.Add(k)
}

// OnPod implements source.Handler: the services whose slices name the pod translate its
// endpoints again (the pod itself stays with the source).
func (x *Index) OnPod(pod *translator.Pod, deleted bool) {
	x.ips.setPod(pod, deleted, x.ownsIP)
	pk := podKey{pod.Namespace(), pod.Name}
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
		s.gen++
		s.mu.Unlock()
		x.queue.Add(k)
	}
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

// KnownServices returns the key of every Service the source has shown, owned or not (the
// IP index holds each one's cluster IPs), in no order.
func (x *Index) KnownServices() []ServiceKey { return x.ips.knownServices() }

// DropUnowned forgets the inputs of every service the replica no longer owns. Their snapshots
// stay while streams hold them (those streams move to the new owner and then release them);
// the rest are released now. It returns the number of services dropped.
func (x *Index) DropUnowned() int {
	n := 0
	x.sliceMu.Lock()
	defer x.sliceMu.Unlock()
	x.services.Range(func(k ServiceKey, s *service) bool {
		if x.Owns(k) {
			return true
		}
		n++
		s.mu.Lock()
		for _, es := range s.slices {
			x.updateRefs(k, es, nil)
			if sk := (sliceKey{es.Namespace, es.Name}); x.sliceSvc[sk] == k { // else it moved to an owned service since
				delete(x.sliceSvc, sk)
			}
		}
		s.svc, s.slices, s.profiles = nil, map[string]*translator.EndpointSlice{}, nil
		s.stale, s.full = nil, true
		s.gen++
		s.mu.Unlock()
		x.queue.Add(k)
		return true
	})
	x.sliceSvc, x.slicesPeak = shrunk(x.sliceSvc, x.slicesPeak)
	x.compactRefs()
	x.ips.dropUnowned(x.ownsIP)
	return n
}
