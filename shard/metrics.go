package shard

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the destination replica's own metrics (grpc_server_* come from grpcserver).
type metrics struct {
	overflow    prometheus.Counter
	streams     *prometheus.GaugeVec
	recomputes  prometheus.Counter
	updatesSent *prometheus.CounterVec

	ownershipChanges prometheus.Counter
	forwarded        prometheus.Gauge
	forwardedTotal   prometheus.Counter
	redirects        prometheus.Counter
	handovers        prometheus.Counter
}

func counter(name, help string) prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
}

func newMetrics() *metrics {
	return &metrics{
		overflow: counter("endpoint_updates_queue_overflow",
			"Times a stream's bounded delta queue was full and its deltas were coalesced into one diff to the newest snapshot."),
		streams: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "destination_streams",
			Help: "Open Destination streams by method.",
		}, []string{"method"}),
		recomputes: counter("destination_service_recomputes_total",
			"Recomputations of a service's address sets after a change to its inputs."),
		updatesSent: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "destination_updates_sent_total",
			Help: "Destination updates sent to streams, by kind (add, remove, no_endpoints).",
		}, []string{"kind"}),
		ownershipChanges: counter("destination_ownership_changes_total",
			"Ring changes applied by this replica (services gained or lost)."),
		forwarded: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "destination_forwarded_streams",
			Help: "Open streams this replica relays to the owner of their service.",
		}),
		forwardedTotal: counter("destination_forwarded_streams_total",
			"Streams (or stream segments after an ownership change) relayed to an owner."),
		redirects: counter("destination_redirects_total",
			"Streams refused with a redirect to the owner (--non-owner=redirect)."),
		handovers: counter("destination_stream_handovers_total",
			"Streams that moved between serving locally and relaying after an ownership change."),
	}
}

// register registers the metrics on reg, with owned reporting destination_owned_services.
// On an error (a name registered already) it registers none of them.
func (m *metrics) register(reg prometheus.Registerer, owned func() float64) error {
	cs := []prometheus.Collector{m.overflow, m.streams, m.recomputes, m.updatesSent,
		m.ownershipChanges, m.forwarded, m.forwardedTotal, m.redirects, m.handovers,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "destination_owned_services",
			Help: "Services whose inputs this replica holds (with a ring: the services it owns).",
		}, owned),
	}
	for i, c := range cs {
		if err := reg.Register(c); err != nil {
			for _, done := range cs[:i] {
				reg.Unregister(done)
			}
			return fmt.Errorf("register destination metrics: %w", err)
		}
	}
	return nil
}
