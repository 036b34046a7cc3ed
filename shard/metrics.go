package shard

import "github.com/prometheus/client_golang/prometheus"

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
		updatesSent: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "destination_updates_sent_total",
			Help: "Destination updates sent to streams, by kind (add, remove, no_endpoints).",
		}, []string{"kind"}),
	}
	m.ownershipChanges = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "destination_ownership_changes_total",
		Help: "Ring changes applied by this replica (services gained or lost).",
	})
	m.forwarded = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "destination_forwarded_streams",
		Help: "Open streams this replica relays to the owner of their service.",
	})
	m.forwardedTotal = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "destination_forwarded_streams_total",
		Help: "Streams (or stream segments after an ownership change) relayed to an owner.",
	})
	m.redirects = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "destination_redirects_total",
		Help: "Streams refused with a redirect to the owner (--non-owner=redirect).",
	})
	m.handovers = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "destination_stream_handovers_total",
		Help: "Streams that moved between serving locally and relaying after an ownership change.",
	})
	if reg != nil {
		reg.MustRegister(m.overflow, m.streams, m.recomputes, m.updatesSent,
			m.ownershipChanges, m.forwarded, m.forwardedTotal, m.redirects, m.handovers)
	}
	return m
}
