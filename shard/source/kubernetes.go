package source

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/meridian-mesh/meridian/internal/kube"
)

// KubernetesConfig configures a Kubernetes source.
type KubernetesConfig struct {
	// Namespace limits the source to one namespace; empty means all namespaces.
	Namespace string
}

// DefaultKubernetesConfig watches all namespaces.
func DefaultKubernetesConfig() KubernetesConfig { return KubernetesConfig{} }

// Kubernetes is a Source backed by client-go shared informers on Services, EndpointSlices
// (discovery.k8s.io/v1) and Pods, without periodic resync.
//
// To keep memory low, a transform replaces every object by translator's projection of it
// before it enters the informers' caches (see slimObject), so the caches, Pod and the handler
// see only projections. Of managedFields the projection keeps one entry holding the newest
// time, which is all the lag metric needs. The lag histograms
// services_informer_lag_seconds, endpointslices_informer_lag_seconds and
// pods_informer_lag_seconds observe, on each update event whose resourceVersion changed,
// now minus that newest managedFields time: how long after the last write the replica saw
// it. Updates with an unchanged resourceVersion (a relist after a cut watch) are neither
// observed nor delivered.
//
// Informer callbacks call the Handler directly; its contract is that it does not block.
// Calls for different kinds are serialised with each other and with Replay by a mutex, held
// only for the call.
type Kubernetes struct {
	client kubernetes.Interface
	cfg    KubernetesConfig
	log    *zap.Logger

	lagServices, lagSlices, lagPods *kube.Lag

	synced  atomic.Bool
	mu      sync.Mutex
	regs    []cache.ResourceEventHandlerRegistration
	running bool
	// Set by Run before the informers start; read by Pod and Replay.
	pods, services, slices cache.Store
	handler                Handler // nil when Run is not running

	// deliverMu serialises handler calls, so that Replay, which delivers each object as the
	// cache holds it now, never delivers it after a newer version or its deletion: the cache
	// is updated before the informer's callback for the change runs.
	deliverMu sync.Mutex
}

// Pod implements Source from the pod informer's cache. The pod must not be modified.
func (k *Kubernetes) Pod(ns, name string) *corev1.Pod {
	k.mu.Lock()
	store := k.pods
	k.mu.Unlock()
	if store == nil {
		return nil
	}
	obj, ok, err := store.GetByKey(ns + "/" + name)
	if err != nil || !ok {
		return nil
	}
	p, _ := obj.(*corev1.Pod)
	return p
}

// Replay implements Source: the objects in the informers' caches are delivered again, pods
// first, then Services, then EndpointSlices. Each is read from the cache under the delivery
// lock, so none goes out after a newer version or its deletion. It must not be called from a
// Handler method.
func (k *Kubernetes) Replay(ctx context.Context) error {
	k.mu.Lock()
	h, pods, services, slices := k.handler, k.pods, k.services, k.slices
	k.mu.Unlock()
	if h == nil {
		return errors.New("kubernetes source: Replay while Run is not running")
	}
	for _, store := range []cache.Store{pods, services, slices} {
		for _, key := range store.ListKeys() {
			if err := ctx.Err(); err != nil {
				return err
			}
			k.deliverMu.Lock()
			if obj, ok, err := store.GetByKey(key); err == nil && ok {
				deliver(h, obj, false)
			}
			k.deliverMu.Unlock()
		}
	}
	return nil
}

var _ Source = (*Kubernetes)(nil)

// NewKubernetes returns a Kubernetes source. Its histograms are registered with reg (which
// may be nil); if reg already holds histograms of the same names, those are used.
func NewKubernetes(client kubernetes.Interface, cfg KubernetesConfig, reg prometheus.Registerer, log *zap.Logger) *Kubernetes {
	if log == nil {
		log = zap.NewNop()
	}
	log = log.With(zap.String("source", "kubernetes"))
	k := &Kubernetes{client: client, cfg: cfg, log: log}
	k.lagServices = lag(reg, log, "services")
	k.lagSlices = lag(reg, log, "endpointslices")
	k.lagPods = lag(reg, log, "pods")
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
	k.synced.Store(true)
	return true
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

	opts := []informers.SharedInformerOption{informers.WithTransform(slimObject)}
	if k.cfg.Namespace != "" {
		opts = append(opts, informers.WithNamespace(k.cfg.Namespace))
	}
	factory := informers.NewSharedInformerFactoryWithOptions(k.client, 0, opts...)
	defer factory.Shutdown()

	type kind struct {
		name     string
		informer cache.SharedIndexInformer
		handler  cache.ResourceEventHandler
	}
	kinds := []kind{
		{"services", factory.Core().V1().Services().Informer(), eventHandler(k, k.lagServices, h.OnService)},
		{"endpointslices", factory.Discovery().V1().EndpointSlices().Informer(), eventHandler(k, k.lagSlices, h.OnEndpointSlice)},
		{"pods", factory.Core().V1().Pods().Informer(), eventHandler(k, k.lagPods, h.OnPod)},
	}
	var regs []cache.ResourceEventHandlerRegistration
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
	}
	k.mu.Lock()
	k.regs = regs
	k.handler = h
	k.services, k.slices, k.pods = kinds[0].informer.GetStore(), kinds[1].informer.GetStore(), kinds[2].informer.GetStore()
	k.mu.Unlock()

	factory.Start(ctx.Done())
	syncs := make([]cache.InformerSynced, len(regs))
	for i, r := range regs {
		syncs[i] = r.HasSynced
	}
	if cache.WaitForCacheSync(ctx.Done(), syncs...) {
		k.log.Info("informers synced")
	}
	<-ctx.Done()
	return nil
}

// eventHandler adapts one Handler method to informer callbacks.
func eventHandler[T metav1.Object](k *Kubernetes, lag *kube.Lag, deliver func(T, bool)) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if o, ok := obj.(T); ok {
				k.deliverMu.Lock()
				deliver(o, false)
				k.deliverMu.Unlock()
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			o, ok1 := oldObj.(T)
			n, ok2 := newObj.(T)
			if !ok1 || !ok2 || o.GetResourceVersion() == n.GetResourceVersion() {
				return
			}
			lag.ObserveUpdate(n)
			k.deliverMu.Lock()
			deliver(n, false)
			k.deliverMu.Unlock()
		},
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if o, ok := obj.(T); ok {
				k.deliverMu.Lock()
				deliver(o, true)
				k.deliverMu.Unlock()
			} else {
				k.log.Warn("unexpected object in delete event", zap.String("type", fmt.Sprintf("%T", obj)))
			}
		},
	}
}
