package source

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"

	"github.com/meridian-mesh/meridian/internal/kube"
	"github.com/meridian-mesh/meridian/internal/run"
	"github.com/meridian-mesh/meridian/internal/serverspec"
	"github.com/meridian-mesh/meridian/translator"
)

// KubernetesConfig configures a Kubernetes source.
type KubernetesConfig struct {
	// Namespace limits the source to one namespace; empty means all namespaces. Nodes are
	// cluster-wide either way.
	Namespace string
}

// DefaultKubernetesConfig watches all namespaces.
func DefaultKubernetesConfig() KubernetesConfig { return KubernetesConfig{} }

// KubernetesClients are the API clients a Kubernetes source reads through.
type KubernetesClients struct {
	// Typed reads Services, EndpointSlices and Pods. Required.
	Typed kubernetes.Interface
	// Dynamic reads policy.linkerd.io Servers (when their CRD is installed); nil: none.
	Dynamic dynamic.Interface
	// Metadata reads Nodes, as metadata only; nil: none (no zones).
	Metadata metadata.Interface
}

// Kubernetes is a Source backed by client-go shared informers on Services, EndpointSlices
// (discovery.k8s.io/v1) and Pods, and, with the clients for them, on Nodes (metadata only)
// and policy.linkerd.io/v1beta3 Servers, without periodic resync.
//
// To keep memory low, a transform replaces every object by translator's projection of it
// before it enters the informers' caches (see slimObject), so the caches, Pod and the handler
// see only projections. Of managedFields the projection keeps one entry holding the newest
// time, which is all the lag metric needs. The lag histograms
// services_informer_lag_seconds, endpointslices_informer_lag_seconds,
// pods_informer_lag_seconds and servers_informer_lag_seconds observe, on each update event
// whose resourceVersion changed, now minus that newest managedFields time: how long after the
// last write the replica saw it. Updates with an unchanged resourceVersion (a relist after a
// cut watch) are neither observed nor delivered.
//
// When the Server or ServiceProfile CRD is not installed when Run starts, that kind is not
// read (until the replica restarts): Warnings says so, and the source syncs without it.
// ServiceProfiles are followed as metadata; a handler's wanted ones are read whole
// (profileFetcher).
//
// Informer callbacks call the Handler directly; its contract is that it does not block.
// Calls for different kinds are serialised with each other and with Replay by a mutex, held
// only for the call.
type Kubernetes struct {
	clients KubernetesClients
	cfg     KubernetesConfig
	log     *zap.Logger

	lagServices, lagSlices, lagPods, lagServers *kube.Lag

	synced  atomic.Bool
	mu      sync.Mutex
	regs    []cache.ResourceEventHandlerRegistration
	running bool
	// Set by Run before the informers start; read by Pod and Replay (stores in the order
	// Replay delivers them).
	pods   cache.Store
	stores []cache.Store
	// factoryStores are the stores of the factory's informers on Pods, Services and
	// EndpointSlices (the last two without a filter only), which slimFactory reuses from.
	factoryStores [3]cache.Store
	// handler is nil when Run is not running.
	handler  Handler
	warnings []string
	// profiles reads the ServiceProfiles the handler wants (nil: none are read).
	profiles *profileFetcher

	// shares are the informers on Services and EndpointSlices that read only what the
	// handler's ServiceFilter admits (share.go); nil when the handler has no filter.
	shares []*shareInformer
	// podShare keeps only the pods the handler's PodFilter wants (pods.go); nil when the
	// handler has no PodFilter, or no ServiceFilter (shares).
	podShare *podShare
	// gainDeleted holds the keys the watch deleted while Gain runs (nil otherwise).
	gainMu      sync.Mutex
	gainDeleted map[string]struct{}
	// noShards is set once the API server answered a list sent with a shard selector
	// without echoing it (ShardedListAndWatch off); sharded once it echoed one.
	noShards, sharded atomic.Bool

	// deliverMu serialises handler calls, so that Replay, which delivers each object as the
	// cache holds it now, never delivers it after a newer version or its deletion: the cache
	// is updated before the informer's callback for the change runs.
	deliverMu sync.Mutex
}

// podStore returns the pod informer's cache (nil before Run sets it).
func (k *Kubernetes) podStore() cache.Store {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.pods
}

// WantPod implements PodLoader (see podShare); it does nothing while Run does not filter pods.
func (k *Kubernetes) WantPod(namespace, name string) {
	if ps := k.podFiltering(); ps != nil {
		ps.WantPod(namespace, name)
	}
}

// ForgetPod implements PodLoader (see podShare); it does nothing while Run does not filter
// pods.
func (k *Kubernetes) ForgetPod(namespace, name string) {
	if ps := k.podFiltering(); ps != nil {
		ps.ForgetPod(namespace, name)
	}
}

// podFiltering returns the podShare while Run keeps only the pods the handler wants, else nil.
func (k *Kubernetes) podFiltering() *podShare {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.podShare
}

// Pod implements Source from the pod informer's cache. The pod must not be modified.
func (k *Kubernetes) Pod(ns, name string) *translator.Pod {
	store := k.podStore()
	if store == nil {
		return nil
	}
	obj, ok, err := store.GetByKey(ns + "/" + name)
	if err != nil || !ok {
		return nil
	}
	p, _ := obj.(*translator.Pod)
	return p
}

// Replay implements Source: the objects in the informers' caches are delivered again, Nodes
// and Servers first, then pods, Services and EndpointSlices, and then the ServiceProfiles the
// handler wants are read again and delivered. Each is read from the cache
// under the delivery lock, so none goes out after a newer version or its deletion. It must
// not be called from a Handler method.
func (k *Kubernetes) Replay(ctx context.Context) (err error) {
	k.mu.Lock()
	h, stores, profiles := k.handler, k.stores, k.profiles
	k.mu.Unlock()
	if h == nil {
		return errors.New("kubernetes source: Replay while Run is not running")
	}
	defer func() {
		if profiles != nil && err == nil {
			err = profiles.replay(ctx)
		}
	}()
	for _, store := range stores {
		for _, key := range store.ListKeys() {
			if err := ctx.Err(); err != nil {
				return err
			}
			k.deliverMu.Lock()
			if obj, ok, err := store.GetByKey(key); err == nil && ok && !isDropped(obj) {
				deliver(h, obj, false) // a placeholder the transform stored is not an object
			}
			k.deliverMu.Unlock()
		}
	}
	return nil
}

// Warnings implements run.Warner: the kinds the source cannot read (a CRD not installed).
func (k *Kubernetes) Warnings() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.warnings)
}

var (
	_ Source      = (*Kubernetes)(nil)
	_ ShareLoader = (*Kubernetes)(nil)
	_ PodLoader   = (*Kubernetes)(nil)
	_ run.Warner  = (*Kubernetes)(nil)
)

// NewKubernetes returns a Kubernetes source reading Services, EndpointSlices and Pods through
// client (NewKubernetesFrom with the typed client only).
func NewKubernetes(client kubernetes.Interface, cfg KubernetesConfig, reg prometheus.Registerer, log *zap.Logger) *Kubernetes {
	return NewKubernetesFrom(KubernetesClients{Typed: client}, cfg, reg, log)
}

// NewKubernetesFrom returns a Kubernetes source reading through clients. Its histograms and
// its cached objects gauge (destination_source_cached_objects) are registered with reg (which
// may be nil); if reg already holds histograms of the same names, those are used.
func NewKubernetesFrom(clients KubernetesClients, cfg KubernetesConfig, reg prometheus.Registerer, log *zap.Logger) *Kubernetes {
	if log == nil {
		log = zap.NewNop()
	}
	log = log.With(zap.String("source", "kubernetes"))
	k := &Kubernetes{clients: clients, cfg: cfg, log: log}
	k.lagServices = lag(reg, log, "services")
	k.lagSlices = lag(reg, log, "endpointslices")
	k.lagPods = lag(reg, log, "pods")
	if clients.Dynamic != nil {
		k.lagServers = lag(reg, log, "servers")
	}
	if reg != nil {
		if err := reg.Register(cachedCollector{k}); err != nil {
			log.Error("cannot register the cached objects gauge", zap.Error(err))
		}
	}
	return k
}

func lag(reg prometheus.Registerer, log *zap.Logger, resource string) *kube.Lag {
	l, err := kube.NewLag(reg, resource)
	if err != nil {
		log.Error("cannot register informer lag histogram", zap.Error(err))
	}
	return l
}

// Synced reports whether every informer's initial list has been delivered to the handler.
func (k *Kubernetes) Synced() bool {
	if k.synced.Load() {
		return true
	}
	k.mu.Lock()
	regs := k.regs
	k.mu.Unlock()
	if len(regs) == 0 {
		return false
	}
	for _, r := range regs {
		if !r.HasSynced() {
			return false
		}
	}
	k.mu.Lock()
	profiles := k.profiles
	k.mu.Unlock()
	if profiles != nil && !profiles.idle() {
		return false // the profiles listed are still being read
	}
	if ps := k.podFiltering(); ps != nil && !ps.idle() {
		return false // pods the slices named during the initial lists are still being read
	}
	k.synced.Store(true)
	return true
}

// informerKind is one informer of the source and the handler of its events.
type informerKind struct {
	name     string
	informer cache.SharedIndexInformer
	handler  cache.ResourceEventHandler
	// noReplay: Replay does not deliver the informer's cache (the ServiceProfile metadata,
	// which the profile fetcher replays).
	noReplay bool
}

// Run starts the informers, delivers to h until ctx ends, and then stops them and waits for
// their goroutines. It can be called once.
func (k *Kubernetes) Run(ctx context.Context, h Handler) error {
	k.mu.Lock()
	if k.running {
		k.mu.Unlock()
		return errors.New("kubernetes source: Run was already called")
	}
	k.running = true
	k.mu.Unlock()
	defer func() {
		k.mu.Lock()
		k.handler = nil
		k.mu.Unlock()
	}()

	opts := []informers.SharedInformerOption{informers.WithTransform(k.slimFactory)}
	if k.cfg.Namespace != "" {
		opts = append(opts, informers.WithNamespace(k.cfg.Namespace))
	}
	factory := informers.NewSharedInformerFactoryWithOptions(k.clients.Typed, 0, opts...)
	defer factory.Shutdown()
	// Nodes and Servers first, so that zones and opaque ports are known when the endpoints
	// arrive (Replay keeps the same order).
	kinds, starts, stop := k.crdKinds(h)
	defer stop()
	if pk, start, stopProfiles, f := k.profileKinds(h); pk != nil {
		pk.noReplay = true
		kinds, starts = append(kinds, *pk), append(starts, start)
		defer stopProfiles()
		k.mu.Lock()
		k.profiles = f
		k.mu.Unlock()
		fctx, stopFetch := context.WithCancel(ctx)
		fetched := make(chan struct{})
		go func() { defer close(fetched); f.run(fctx) }()
		defer func() { stopFetch(); <-fetched }()
	}
	svcInf, sliceInf, err := k.serviceInformers(factory, h)
	if err != nil {
		return fmt.Errorf("kubernetes source: %w", err)
	}
	ps, podHandler, stopPods := k.podKind(ctx, h)
	defer stopPods()
	kinds = append(kinds,
		informerKind{name: "pods", informer: factory.InformerFor(&corev1.Pod{}, k.podInformer), handler: podHandler},
		informerKind{name: "services", informer: svcInf, handler: eventHandler(k, k.lagServices, h.OnService)},
		informerKind{name: "endpointslices", informer: sliceInf, handler: eventHandler(k, k.lagSlices, h.OnEndpointSlice)},
	)
	var regs []cache.ResourceEventHandlerRegistration
	var stores []cache.Store
	for _, kd := range kinds {
		name := kd.name
		if err := kd.informer.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
			k.log.Warn("watch failed; the informer retries", zap.String("resource", name), zap.Error(err))
		}); err != nil {
			return fmt.Errorf("kubernetes source: %s: %w", name, err)
		}
		reg, err := kd.informer.AddEventHandler(kd.handler)
		if err != nil {
			return fmt.Errorf("kubernetes source: %s: %w", name, err)
		}
		regs = append(regs, reg)
		if !kd.noReplay {
			stores = append(stores, kd.informer.GetStore())
		}
		k.mu.Lock()
		switch name {
		case "pods":
			k.pods = kd.informer.GetStore()
			k.factoryStores[0] = k.pods
		case "services":
			if len(k.shares) == 0 { // the factory's informer (no filter)
				k.factoryStores[1] = kd.informer.GetStore()
			}
		case "endpointslices":
			if len(k.shares) == 0 {
				k.factoryStores[2] = kd.informer.GetStore()
			}
		}
		k.mu.Unlock()
	}
	k.mu.Lock()
	k.regs = regs
	k.handler = h
	k.stores = stores
	k.mu.Unlock()

	if ps == nil {
		factory.Start(ctx.Done())
	}
	var shareWG sync.WaitGroup
	defer shareWG.Wait()
	for _, si := range k.shares {
		shareWG.Go(func() { si.informer.RunWithContext(ctx) })
	}
	for _, start := range starts {
		start(ctx.Done())
	}
	syncs := make([]cache.InformerSynced, len(regs))
	for i, r := range regs {
		syncs[i] = r.HasSynced
	}
	if ps != nil {
		// The pods wanted are those the slices name: the pod informer lists once the
		// handler has every slice (the last two kinds), so that its list keeps them.
		if cache.WaitForCacheSync(ctx.Done(), syncs[len(syncs)-2:]...) {
			factory.Start(ctx.Done())
		}
	}
	if cache.WaitForCacheSync(ctx.Done(), syncs...) {
		k.initialSynced(ps)
	}
	<-ctx.Done()
	return nil
}

// initialSynced follows the informers' initial lists: a ring change during them may have left
// objects of services the replica no longer owns (see Release), and the pods the slices
// named meanwhile are read now.
func (k *Kubernetes) initialSynced(ps *podShare) {
	k.sweep(k.shares)
	if f := k.profiles; f != nil {
		f.sweep()
	}
	if ps != nil {
		ps.endDefer() // the initial sync's
	}
	k.log.Info("informers synced")
}

// podKind returns the pod informer's event handler and, when h is a PodFilter (and a
// ServiceFilter: the source reads shares), the podShare that keeps only the pods h wants,
// running its readers until the returned function stops them (it waits for them).
func (k *Kubernetes) podKind(ctx context.Context, h Handler) (*podShare, cache.ResourceEventHandlerFuncs, func()) {
	pf, ok := h.(PodFilter)
	if !ok || len(k.shares) == 0 {
		return nil, eventHandler(k, k.lagPods, h.OnPod), func() {}
	}
	ps := newPodShare(k, pf)
	k.mu.Lock()
	k.podShare = ps
	k.mu.Unlock()
	pctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); ps.run(pctx) }()
	return ps, ps.handler(eventHandler(k, k.lagPods, ps.onPod(h)), h), func() { stop(); <-done }
}

// slimFactory is the factory informers' transform: slimObject, and then the cached object
// in place of a relisted copy of it (reuseCached).
func (k *Kubernetes) slimFactory(obj any) (any, error) {
	o, err := slimObject(obj)
	if err != nil {
		return o, err
	}
	i := -1
	switch o.(type) {
	case *translator.Pod:
		i = 0
	case *corev1.Service:
		i = 1
	case *translator.EndpointSlice:
		i = 2
	}
	if i < 0 {
		return o, nil
	}
	k.mu.Lock()
	store := k.factoryStores[i]
	k.mu.Unlock()
	if store == nil {
		return o, nil
	}
	return reuseCached(store, o), nil
}

// serviceInformers returns the informers on Services and EndpointSlices: when h is a
// ServiceFilter, those that decode only what it admits (shareInformers, recorded for Gain and
// Release), else the factory's.
func (k *Kubernetes) serviceInformers(factory informers.SharedInformerFactory, h Handler) (svc, es cache.SharedIndexInformer, err error) {
	f, ok := h.(ServiceFilter)
	if !ok {
		return factory.Core().V1().Services().Informer(), factory.Discovery().V1().EndpointSlices().Informer(), nil
	}
	sharder, _ := h.(NamespaceSharder)
	services, slices, err := k.shareInformers(f.WantsService, sharder)
	if err != nil {
		return nil, nil, err
	}
	k.mu.Lock()
	k.shares = []*shareInformer{services, slices}
	k.mu.Unlock()
	return services.informer, slices.informer, nil
}

// crdKinds returns the informers on Nodes (metadata only) and Servers the clients allow,
// the functions that start them, and the function that stops them.
func (k *Kubernetes) crdKinds(h Handler) (kinds []informerKind, starts []func(<-chan struct{}), stop func()) {
	var stops []func()
	stop = func() {
		for _, s := range stops {
			s()
		}
	}
	if k.clients.Metadata != nil {
		nodes := metadatainformer.NewSharedInformerFactoryWithOptions(k.clients.Metadata, 0,
			metadatainformer.WithTransform(slimNode))
		inf := nodes.ForResource(corev1.SchemeGroupVersion.WithResource("nodes")).Informer()
		nh, _ := h.(NodeHandler)
		kinds = append(kinds, informerKind{name: "nodes", informer: inf, handler: eventHandler(k, nil, func(n *metav1.PartialObjectMetadata, deleted bool) {
			if nh != nil {
				nh.OnNode(n, deleted)
			}
		})})
		starts, stops = append(starts, nodes.Start), append(stops, nodes.Shutdown)
	}
	if k.clients.Dynamic != nil {
		if err := k.served(serverGVR); err != nil {
			k.warn(fmt.Sprintf("Servers (%s) are not read, so they make no port opaque: %v", serverGVR.GroupResource(), err))
		} else {
			dyn := dynamicinformer.NewFilteredDynamicSharedInformerFactory(k.clients.Dynamic, 0, k.cfg.Namespace, nil)
			inf := dyn.ForResource(serverGVR).Informer()
			if err := inf.SetTransform(k.slimServer); err != nil {
				k.warn(fmt.Sprintf("Servers are not read: %v", err))
			} else {
				sh, _ := h.(ServerHandler)
				kinds = append(kinds, informerKind{name: "servers", informer: inf, handler: eventHandler(k, k.lagServers, func(s *translator.Server, deleted bool) {
					if sh != nil {
						sh.OnServer(s, deleted)
					}
				})})
				starts, stops = append(starts, dyn.Start), append(stops, dyn.Shutdown)
			}
		}
	}
	return kinds, starts, stop
}

// serverGVR is the storage version of Linkerd's Server.
var serverGVR = schema.GroupVersionResource{Group: serverspec.Group, Version: "v1beta3", Resource: "servers"}

// served reports nil when the API server serves gvr.
func (k *Kubernetes) served(gvr schema.GroupVersionResource) error {
	rl, err := k.clients.Typed.Discovery().ServerResourcesForGroupVersion(gvr.GroupVersion().String())
	if err != nil {
		return fmt.Errorf("%s is not served (is its CRD installed? restart the replica after installing it): %w", gvr.GroupVersion(), err)
	}
	for _, r := range rl.APIResources {
		if r.Name == gvr.Resource {
			return nil
		}
	}
	return fmt.Errorf("%s serves no %s (is its CRD installed? restart the replica after installing it)", gvr.GroupVersion(), gvr.Resource)
}

func (k *Kubernetes) warn(msg string) {
	k.log.Warn(msg)
	k.mu.Lock()
	k.warnings = append(k.warnings, msg)
	k.mu.Unlock()
}

// podInformer is the factory's Pod informer without its namespace index, which nothing
// reads (Pod looks a pod up by its key): the index would hold an entry per pod. When the
// source keeps only the pods the handler wants, it lists and watches through the podShare.
func (k *Kubernetes) podInformer(c kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
	if ps := k.podFiltering(); ps != nil {
		return cache.NewSharedIndexInformer(ps.listWatch(), &corev1.Pod{}, resync, cache.Indexers{})
	}
	return coreinformers.NewFilteredPodInformer(c, k.cfg.Namespace, resync, cache.Indexers{}, nil)
}
