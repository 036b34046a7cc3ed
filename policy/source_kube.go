package policy

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/meridian-mesh/meridian/internal/kube"
	"github.com/meridian-mesh/meridian/policy/api"
	"github.com/meridian-mesh/meridian/policy/compute"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// KubeSource watches Pods (a typed client-go informer) and the policy.linkerd.io resources
// (dynamic informers on their storage versions: Server v1beta3, AuthorizationPolicy,
// MeshTLSAuthentication and NetworkAuthentication v1alpha1, ServerAuthorization v1beta1) in
// every namespace. Informer callbacks convert the object and hand it to the Sink, which never
// blocks. An object that fails conversion is logged at warn, counted in
// policy_invalid_resources_total and listed by Warnings until it is fixed or deleted; the
// Sink keeps its last good version (an invalid edit never widens the policy), and one
// invalid from the start stays absent. A policy resource with a value conversion ignores (a
// Server's accessPolicy none of Linkerd's, which then denies by default) applies, and is
// logged at warn and listed by Warnings the same way; a Pod's annotations that do not parse
// (ignored, or failing closed: api.ConvertPod) are logged at info on each of its updates (a
// workload's many pods share them, and the injector warns of them at admission).
//
// On update events whose resourceVersion changed, <resource>_informer_lag_seconds (pods,
// servers, authorizationpolicies, meshtlsauthentications, networkauthentications,
// serverauthorizations) observes now minus the newest managedFields time of the object.
type KubeSource struct {
	client  kubernetes.Interface
	dynamic dynamic.Interface
	log     *zap.Logger
	metrics *Metrics
	lag     map[api.Kind]*kube.Lag

	mu      sync.Mutex
	regs    []cache.ResourceEventHandlerRegistration
	invalid map[string]string // "Kind ns/name" -> why its latest version was rejected, or what of it was ignored
}

var _ Source = (*KubeSource)(nil)

// lagNames are the informer lag histogram names per kind.
var lagNames = map[api.Kind]string{
	api.KindPod:                   "pods",
	api.KindServer:                "servers",
	api.KindAuthorizationPolicy:   "authorizationpolicies",
	api.KindMeshTLSAuthentication: "meshtlsauthentications",
	api.KindNetworkAuthentication: "networkauthentications",
	api.KindServerAuthorization:   "serverauthorizations",
}

// NewKubeSource returns a Kubernetes source. Its histograms are registered on reg (nil: not
// registered; histograms already registered under the same names are reused). metrics may
// be nil.
func NewKubeSource(client kubernetes.Interface, dyn dynamic.Interface, reg prometheus.Registerer, log *zap.Logger, metrics *Metrics) *KubeSource {
	if metrics == nil {
		metrics = NewMetrics(nil)
	}
	k := &KubeSource{client: client, dynamic: dyn, log: log.With(zap.String("source", "kubernetes")), metrics: metrics,
		lag: map[api.Kind]*kube.Lag{}, invalid: map[string]string{}}
	for kind, name := range lagNames {
		l, err := kube.NewLag(reg, name)
		if err != nil {
			k.log.Error("cannot register informer lag histogram", zap.Error(err))
		}
		k.lag[kind] = l
	}
	return k
}

// Synced reports whether every informer has delivered its initial list.
func (k *KubeSource) Synced() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.regs) != 1+len(api.Resources) {
		return false
	}
	for _, r := range k.regs {
		if !r.HasSynced() {
			return false
		}
	}
	return true
}

// Run starts the informers and blocks until ctx ends; it then stops them and waits for their
// goroutines.
func (k *KubeSource) Run(ctx context.Context, sink Sink) error {
	typed := informers.NewSharedInformerFactory(k.client, 0)
	dyn := dynamicinformer.NewDynamicSharedInformerFactory(k.dynamic, 0)
	defer func() {
		typed.Shutdown()
		dyn.Shutdown()
	}()

	reg, err := typed.Core().V1().Pods().Informer().AddEventHandler(k.handler(api.KindPod, sink))
	if err != nil {
		return fmt.Errorf("pod informer: %w", err)
	}
	regs := []cache.ResourceEventHandlerRegistration{reg}
	for _, kind := range api.Kinds[1:] {
		reg, err := dyn.ForResource(api.Resources[kind]).Informer().AddEventHandler(k.handler(kind, sink))
		if err != nil {
			return fmt.Errorf("%s informer: %w", kind, err)
		}
		regs = append(regs, reg)
	}
	k.mu.Lock()
	k.regs = regs
	k.mu.Unlock()
	typed.Start(ctx.Done())
	dyn.Start(ctx.Done())
	<-ctx.Done()
	return nil
}

// errUnexpectedType is convert's error for an informer object of an unexpected type.
var errUnexpectedType = errors.New("unexpected object type from informer")

// convert converts an informer object.
func (k *KubeSource) convert(obj any) (api.Resource, compute.Key, error) {
	switch o := obj.(type) {
	case *corev1.Pod:
		p, warnings := api.ConvertPod(o)
		key := compute.Key{Namespace: o.Namespace, Name: o.Name}
		if len(warnings) > 0 {
			k.log.Info("pod annotations that do not parse", zap.Stringer("pod", key), zap.String("reasons", strings.Join(warnings, "; ")))
		}
		return api.Resource{Kind: api.KindPod, Key: key, Value: p}, key, nil
	case *unstructured.Unstructured:
		key := compute.Key{Namespace: o.GetNamespace(), Name: o.GetName()}
		r, err := api.Convert(o, "")
		return r, key, err
	}
	return api.Resource{}, compute.Key{}, fmt.Errorf("%w: %T", errUnexpectedType, obj)
}

// Warnings lists the objects whose latest version failed conversion (the policy index holds
// their last good version, if any) or applies without a value it ignored, one line each.
// Safe for concurrent use.
func (k *KubeSource) Warnings() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := make([]string, 0, len(k.invalid))
	for obj, why := range k.invalid {
		out = append(out, obj+": "+why)
	}
	sort.Strings(out)
	return out
}

func (k *KubeSource) setInvalid(kind api.Kind, key compute.Key, why string) {
	id := string(kind) + " " + key.String()
	k.mu.Lock()
	defer k.mu.Unlock()
	if why == "" {
		delete(k.invalid, id)
	} else {
		k.invalid[id] = why
	}
}

func (k *KubeSource) handler(kind api.Kind, sink Sink) cache.ResourceEventHandler {
	deliver := func(obj any, update bool) {
		r, key, err := k.convert(obj)
		switch {
		case errors.Is(err, errUnexpectedType):
			k.log.Warn("object ignored", zap.String("kind", string(kind)), zap.Error(err))
		case err != nil:
			// Keep what the sink holds: deleting it would widen the policy (a deny-only port
			// would fall back to the cluster default).
			k.metrics.invalid.WithLabelValues(string(kind)).Inc()
			k.setInvalid(kind, key, err.Error())
			msg := "invalid resource ignored"
			if update {
				msg = "invalid update ignored; the last good version stays in effect"
			}
			k.log.Warn(msg, zap.String("kind", string(kind)), zap.Stringer("key", key), zap.Error(err))
		case kind != api.KindPod && len(r.Warnings) > 0:
			// Applied without the values it ignored (an unknown accessPolicy: deny by default).
			why := strings.Join(r.Warnings, "; ")
			k.setInvalid(kind, key, why)
			k.log.Warn("resource value ignored; the resource applies without it", zap.String("kind", string(kind)), zap.Stringer("key", key), zap.String("reason", why))
			sink.Apply(r)
		default:
			k.setInvalid(kind, key, "")
			sink.Apply(r)
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { deliver(obj, false) },
		UpdateFunc: func(oldObj, newObj any) {
			o, ok1 := oldObj.(metav1.Object)
			n, ok2 := newObj.(metav1.Object)
			if ok1 && ok2 && o.GetResourceVersion() == n.GetResourceVersion() {
				return // a resync: nothing changed
			}
			if ok2 {
				k.lag[kind].ObserveUpdate(n)
			}
			deliver(newObj, true)
		},
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			m, ok := obj.(metav1.Object)
			if !ok {
				k.log.Warn("unexpected object in delete event", zap.String("type", fmt.Sprintf("%T", obj)))
				return
			}
			key := compute.Key{Namespace: m.GetNamespace(), Name: m.GetName()}
			k.setInvalid(kind, key, "")
			sink.Delete(kind, key)
		},
	}
}
