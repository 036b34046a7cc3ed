package identity

import (
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"

	"github.com/meridian-mesh/meridian/internal/metrics"
)

type serviceMetrics struct {
	issuerExpiry prometheus.Gauge
	certify      *prometheus.CounterVec
	reloads      *prometheus.CounterVec
}

// newMetrics creates the identity_* metrics on reg (nil: not registered), sharing those
// already registered under the same names; a name taken by another metric is an error.
func newMetrics(reg prometheus.Registerer) (*serviceMetrics, error) {
	s := metrics.Shared(reg)
	m := &serviceMetrics{
		issuerExpiry: s.Gauge("identity_cert_expiration_timestamp_seconds",
			"Expiry of the loaded issuer certificate, as a Unix timestamp in seconds."),
		certify: s.CounterVec("identity_certify_requests_total",
			"Certify requests by result (issued, refused: the request was bad, failed: the server could not serve it) and gRPC code.",
			"result", "code"),
		reloads: s.CounterVec("identity_issuer_reloads_total",
			"Issuer reloads by result (updated, skipped: the new material was refused and the old issuer kept).", "result"),
	}
	if err := s.Err(); err != nil {
		return nil, err
	}
	return m, nil
}

func resultOf(c codes.Code) string {
	switch c {
	case codes.OK:
		return "issued"
	case codes.InvalidArgument, codes.FailedPrecondition, codes.Unauthenticated, codes.PermissionDenied:
		return "refused"
	default:
		return "failed"
	}
}
