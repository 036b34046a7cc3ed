package kube

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meridian-mesh/meridian/internal/metrics"
)

// LagBuckets are the buckets of the informer lag histograms, in seconds. The lag is measured
// against managedFields times, which the API server keeps with one-second resolution, so
// buckets below a second say little.
var LagBuckets = []float64{0.5, 1, 2, 3, 5, 10, 30, 60, 120, 300}

// Lag observes how long after an object's last write an informer saw it.
type Lag struct{ h prometheus.Observer }

// NewLag returns the histogram <resource>_informer_lag_seconds (resource in the plural, lower
// case: "pods", "endpointslices"), registered on reg (which may be nil). When reg already holds
// it (two components in one process) the registered one is shared. When it cannot be
// registered (the name is taken by another metric), the error comes with a Lag that works
// unregistered.
func NewLag(reg prometheus.Registerer, resource string) (*Lag, error) {
	s := metrics.Shared(reg)
	h := s.Histogram(resource+"_informer_lag_seconds",
		fmt.Sprintf("Seconds between the newest managedFields time of an updated %s object and the informer's update event for it.", resource),
		LagBuckets)
	return &Lag{h}, s.Err()
}

// ObserveUpdate records the lag of an update event: now minus the newest managedFields time
// of o. Objects without managedFields times are not observed. Call it for updates whose
// resourceVersion changed only; a relist re-delivers unchanged objects.
func (l *Lag) ObserveUpdate(o metav1.Object) {
	if l == nil {
		return
	}
	if t := NewestManagedTime(o); !t.IsZero() {
		// Negative only through clock skew between the API server and us.
		l.h.Observe(max(time.Since(t).Seconds(), 0))
	}
}

// NewestManagedTime returns the newest managedFields time of an object, or zero. An object
// that keeps only that time (a projection) may say so itself, without building the entries.
func NewestManagedTime(o metav1.Object) time.Time {
	if m, ok := o.(interface{ NewestManagedTime() time.Time }); ok {
		return m.NewestManagedTime()
	}
	var t time.Time
	for _, f := range o.GetManagedFields() {
		if f.Time != nil && f.Time.After(t) {
			t = f.Time.Time
		}
	}
	return t
}
