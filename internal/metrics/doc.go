// Package metrics creates Meridian's Prometheus metrics in one line each and registers them,
// one way for every component: a Set is bound to a prometheus.Registerer (nil: the metrics
// work but are not exported) and offers Counter, CounterVec, Gauge, GaugeVec, GaugeFunc and
// Histogram.
//
// A Set is Shared or Exclusive. Shared is for metrics that two components of one process (or
// two instances of one, as in a test or the demo) may both create: a collector of the same
// name and type already registered is used in its place. Exclusive is for metrics that belong
// to one instance: a name already registered is an error, and Unregister undoes what the Set
// registered. Either way a clash (the name taken by another help, other labels or another
// type) leaves the new collector working but unregistered, and Err reports it.
//
// It owns no metric of its own. It imports the Prometheus client and the standard library; it
// must not import `github.com/meridian-mesh/meridian/...`.
//
// Allowed imports: `std`, `github.com/prometheus/client_golang/prometheus`.
package metrics
