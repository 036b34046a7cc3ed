package source

import (
	"fmt"

	"go.uber.org/zap"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/meridian-mesh/meridian/internal/kube"
	"github.com/meridian-mesh/meridian/translator"
)

// eventHandler adapts one Handler method to informer callbacks.
func eventHandler[T metav1.Object](k *Kubernetes, lag *kube.Lag, deliver func(T, bool)) cache.ResourceEventHandlerFuncs {
	// placeholder delivers the placeholder of a slice (IsPlaceholder) as a deletion; those of
	// other kinds are not delivered.
	placeholder := func(obj any) {
		es, slice := obj.(*translator.EndpointSlice)
		if !slice {
			return
		}
		if o, ok := obj.(T); ok {
			k.deliverMu.Lock()
			if !k.sliceCached(es.Namespace, es.Name) {
				deliver(o, true)
			}
			k.deliverMu.Unlock()
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			obj = expandReduced(obj)
			if isDropped(obj) { // reduced by the transform (shareLW.slim)
				placeholder(obj)
				return
			}
			if o, ok := obj.(T); ok {
				k.deliverMu.Lock()
				deliver(o, false)
				k.deliverMu.Unlock()
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			oldObj, newObj = expandReduced(oldObj), expandReduced(newObj)
			o, ok1 := oldObj.(T)
			n, ok2 := newObj.(T)
			if !ok1 || !ok2 {
				return
			}
			// The same version is a resync, unless the cache kept the object reduced and
			// now has it whole: a relist read it under a filter that wants it now (a ring
			// change gave its service here), and Gain, which sees it whole in the cache,
			// leaves its delivery to this event.
			same := o.GetResourceVersion() == n.GetResourceVersion()
			if same && !(isReduced(o) && !isReduced(n)) {
				return
			}
			if isDropped(n) { // reduced by the transform: the filter changed since the decode
				placeholder(n)
				return
			}
			if !same {
				lag.ObserveUpdate(n) // a relist's copy of an unchanged object has no lag to tell
			}
			k.deliverMu.Lock()
			deliver(n, false)
			k.deliverMu.Unlock()
		},
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			obj = expandReduced(obj)
			if isDropped(obj) {
				// An unwanted object leaving the cache: the handler never had it, or had a
				// slice whose label named another service (IsPlaceholder).
				placeholder(obj)
				return
			}
			k.noteDeleted(obj)
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

// sliceCached reports whether the share informer's cache holds the slice namespace/name whole
// (not a placeholder). A placeholder delivered then is stale: the informer's listener calls
// the handler after the cache changed, and meanwhile the slice came back under a wanted
// service (a later event, or Gain, which delivers straight from its list), which the handler
// has or will be given. Delivering the placeholder would take the slice out of that service.
func (k *Kubernetes) sliceCached(namespace, name string) bool {
	k.mu.Lock()
	shares := k.shares
	k.mu.Unlock()
	for _, s := range shares {
		if s.lw.kind.kind != "EndpointSlice" {
			continue
		}
		obj, ok, err := s.informer.GetStore().GetByKey(namespace + "/" + name)
		return err == nil && ok && !isDropped(obj)
	}
	return false
}
