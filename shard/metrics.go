package shard

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/meridian-mesh/meridian/internal/metrics"
)

// replicaMetrics are the destination replica's own metrics (grpc_server_* come from
// grpcserver).
type replicaMetrics struct {
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

// newMetrics creates the replica's metrics on s (an Exclusive Set: they belong to one
// replica, so a second replica on the same registry is an error).
func newMetrics(s *metrics.Set) *replicaMetrics {
	return &replicaMetrics{
		overflow: s.Counter("endpoint_updates_queue_overflow",
			"Times a stream's bounded delta queue was full and its deltas were coalesced into one diff to the newest snapshot."),
		streams: s.GaugeVec("destination_streams", "Open Destination streams by method.", "method"),
		recomputes: s.Counter("destination_service_recomputes_total",
			"Recomputations of a service's address sets after a change to its inputs."),
		updatesSent: s.CounterVec("destination_updates_sent_total",
			"Destination updates sent to streams, by kind (add, remove, no_endpoints).", "kind"),
		ownershipChanges: s.Counter("destination_ownership_changes_total",
			"Ring changes applied by this replica (services gained or lost)."),
		forwarded: s.Gauge("destination_forwarded_streams",
			"Open streams this replica relays to the owner of their service."),
		forwardedTotal: s.Counter("destination_forwarded_streams_total",
			"Streams (or stream segments after an ownership change) relayed to an owner."),
		redirects: s.Counter("destination_redirects_total",
			"Streams refused with a redirect to the owner (--non-owner=redirect)."),
		handovers: s.Counter("destination_stream_handovers_total",
			"Streams that moved between serving locally and relaying after an ownership change."),
	}
}

// ownedServices adds destination_owned_services to s, reporting owned.
func ownedServices(s *metrics.Set, owned func() float64) {
	s.GaugeFunc("destination_owned_services",
		"Services whose inputs this replica holds (with a ring: the services it owns).", owned)
}
