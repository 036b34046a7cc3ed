package policy

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/meridian-mesh/meridian/internal/metrics"
)

// Metrics are the policy controller's Prometheus metrics (besides grpc_server_* from
// internal/grpcserver and the informer lag histograms of KubeSource).
type Metrics struct {
	objects    *prometheus.GaugeVec
	watches    prometheus.Gauge
	sent       prometheus.Counter
	suppressed prometheus.Counter
	coalesced  prometheus.Counter
	conflicts  *prometheus.GaugeVec
	invalid    *prometheus.CounterVec
}

// NewMetrics creates the metrics and registers them on reg (nil: not registered). A
// collector already registered under the same name is reused, so two controllers may share
// a registry (as in a test or the demo); a clashing collector of the same name (another
// component's, with other help or labels) leaves the metric working but unregistered rather
// than failing the process.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	s := metrics.Shared(reg)
	return &Metrics{
		objects: s.GaugeVec("policy_index_objects", "Objects held by the policy index, by kind.", "kind"),
		watches: s.Gauge("policy_watches", "Open WatchPort streams."),
		sent: s.Counter("policy_watch_updates_sent_total",
			"Server policies sent on WatchPort streams (including each stream's first)."),
		suppressed: s.Counter("policy_watch_updates_suppressed_total",
			"Recomputations on WatchPort streams whose result equalled what the stream last sent, so nothing was sent."),
		coalesced: s.Counter("policy_watch_wakeups_coalesced_total",
			"Changes that found a WatchPort stream already due to recompute and were folded into that recomputation."),
		conflicts: s.GaugeVec("policy_server_conflicts",
			"Pod ports selected by more than one Server (the oldest Server, then the first by name, wins), by namespace.", "namespace"),
		invalid: s.CounterVec("policy_invalid_resources_total",
			"Objects rejected by conversion, by kind (the last good version of each stays in effect; one never valid stays absent).", "kind"),
	}
}
