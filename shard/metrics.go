package shard

import "github.com/prometheus/client_golang/prometheus"

// metrics are the destination replica's own metrics (grpc_server_* come from grpcserver).
type metrics struct {
	overflow    prometheus.Counter
	streams     *prometheus.GaugeVec
	recomputes  prometheus.Counter
	services    prometheus.Gauge
	updatesSent *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		overflow: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "endpoint_updates_queue_overflow",
			Help: "Times a stream's bounded delta queue was full and its deltas were coalesced into one diff to the newest snapshot.",
		}),
		streams: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "destination_streams",
			Help: "Open Destination streams by method.",
		}, []string{"method"}),
		recomputes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "destination_service_recomputes_total",
			Help: "Recomputations of a service's address sets after a change to its inputs.",
		}),
		services: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "destination_services",
			Help: "Services whose inputs this replica holds.",
		}),
		updatesSent: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "destination_updates_sent_total",
			Help: "Destination updates sent to streams, by kind (add, remove, no_endpoints).",
		}, []string{"kind"}),
	}
	if reg != nil {
		reg.MustRegister(m.overflow, m.streams, m.recomputes, m.services, m.updatesSent)
	}
	return m
}
