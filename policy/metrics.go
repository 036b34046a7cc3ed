package policy

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
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
// a registry (as in a test or the demo).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		objects: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "policy_index_objects",
			Help: "Objects held by the policy index, by kind.",
		}, []string{"kind"}),
		watches: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "policy_watches",
			Help: "Open WatchPort streams.",
		}),
		sent: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "policy_watch_updates_sent_total",
			Help: "Server policies sent on WatchPort streams (including each stream's first).",
		}),
		suppressed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "policy_watch_updates_suppressed_total",
			Help: "Recomputations on WatchPort streams whose result equalled what the stream last sent, so nothing was sent.",
		}),
		coalesced: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "policy_watch_wakeups_coalesced_total",
			Help: "Changes that found a WatchPort stream already due to recompute and were folded into that recomputation.",
		}),
		conflicts: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "policy_server_conflicts",
			Help: "Pod ports selected by more than one Server (the oldest Server, then the first by name, wins), by namespace.",
		}, []string{"namespace"}),
		invalid: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "policy_invalid_resources_total",
			Help: "Objects rejected by conversion, by kind (the last good version of each stays in effect; one never valid stays absent).",
		}, []string{"kind"}),
	}
	if reg != nil {
		m.objects = register(reg, m.objects)
		m.watches = register(reg, m.watches)
		m.sent = register(reg, m.sent)
		m.suppressed = register(reg, m.suppressed)
		m.coalesced = register(reg, m.coalesced)
		m.conflicts = register(reg, m.conflicts)
		m.invalid = register(reg, m.invalid)
	}
	return m
}

// register registers c on reg, or returns the collector already registered in its place. A
// clashing collector of the same name (another component's, with other help or labels)
// leaves c working but unregistered rather than failing the process.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
	}
	return c
}
