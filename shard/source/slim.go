package source

import (
	"go.uber.org/zap"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"

	"github.com/meridian-mesh/meridian/translator"
)

// slimObject is the informers' transform. It runs on every object before it enters the
// cache and the handlers see it, and replaces each Service, EndpointSlice and Pod by
// translator's projection of it (translator.Project): the caches hold only what the
// destination reads, and the index keeps the projected Services and slices it is handed
// without copying them again.
//
// The projection keeps, of managedFields, the newest entry's time (with its manager and
// operation), which the lag histograms read in the update handler: the transform runs before
// the handler, so the time has to survive it in the object itself, and keeping it there
// (rather than in a side map) is exact and needs no cleanup.
//
// It is idempotent, as client-go requires: a projection is returned as it is. client-go does
// not pass tombstones (cache.DeletedFinalStateUnknown) to the transform, and their objects
// come from the cache, projected already; one passed anyway carries its object projected.
func slimObject(obj any) (any, error) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		if !isReduced(d.Obj) {
			d.Obj = translator.Project(d.Obj)
		}
		return d, nil
	}
	if isReduced(obj) {
		return obj, nil // a Service's cluster IPs only, or a placeholder (sharekinds.go)
	}
	return translator.Project(obj), nil
}

// slimNode is the Node informer's transform: a Node's metadata becomes its projection (its
// name and zone, translator.ProjectNode). It is idempotent.
func slimNode(obj any) (any, error) {
	switch o := obj.(type) {
	case cache.DeletedFinalStateUnknown:
		if n, ok := o.Obj.(*metav1.PartialObjectMetadata); ok && !translator.IsSlimNode(n) {
			o.Obj = translator.ProjectNode(&n.ObjectMeta)
		}
		return o, nil
	case *metav1.PartialObjectMetadata:
		if translator.IsSlimNode(o) {
			return o, nil
		}
		return translator.ProjectNode(&o.ObjectMeta), nil
	}
	return obj, nil
}

// slimServer is the Server informer's transform: the unstructured object becomes its
// projection (translator.Server). An invalid Server is kept with its Problem set (it selects
// nothing; the index keeps the last good version, and the event handler logs it); one that
// is not a Server at all is logged and kept as it is, which the handlers ignore. It is
// idempotent.
func (k *Kubernetes) slimServer(obj any) (any, error) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		o, err := k.slimServer(d.Obj)
		d.Obj = o
		return d, err
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	s, err := translator.ServerFromUnstructured(u.Object)
	if s == nil {
		k.log.Warn("object of the Server informer ignored", zap.String("name", u.GetNamespace()+"/"+u.GetName()), zap.Error(err))
		return obj, nil
	}
	if err != nil {
		k.log.Warn("invalid Server: it selects nothing; the last good version stays in effect",
			zap.String("server", u.GetNamespace()+"/"+u.GetName()), zap.Error(err))
	}
	return s, nil
}

// reuseCached returns the object store holds under obj's key when it is the same version of
// obj (the same resourceVersion), else obj. The reflector lists again when it cannot resume
// its watch, and each object of that list is then a new copy of one already cached, which
// the event handlers pass over (an update that changes no resourceVersion): stored as it is,
// it would replace the cache's copy while the handler (the index) keeps the old one, and a
// replica would hold every object twice. Reusing the cached object keeps one copy.
func reuseCached(store cache.Store, obj any) any {
	m, ok := obj.(metav1.Object)
	if !ok || m.GetResourceVersion() == "" {
		return obj
	}
	cur, ok, err := store.Get(obj)
	if err != nil || !ok {
		return obj
	}
	if c, ok := cur.(metav1.Object); ok && c.GetResourceVersion() == m.GetResourceVersion() && c.GetUID() == m.GetUID() && !isReduced(cur) {
		return cur
	}
	return obj
}
