package source

import (
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
		d.Obj = translator.Project(d.Obj)
		return d, nil
	}
	return translator.Project(obj), nil
}
