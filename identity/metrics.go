package identity

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
)

type metrics struct {
	issuerExpiry prometheus.Gauge
	certify      *prometheus.CounterVec
	reloads      *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		issuerExpiry: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "identity_cert_expiration_timestamp_seconds",
			Help: "Expiry of the loaded issuer certificate, as a Unix timestamp in seconds.",
		}),
		certify: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "identity_certify_requests_total",
			Help: "Certify requests by result (issued, refused: the request was bad, failed: the server could not serve it) and gRPC code.",
		}, []string{"result", "code"}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "identity_issuer_reloads_total",
			Help: "Issuer reloads by result (updated, skipped: the new material was refused and the old issuer kept).",
		}, []string{"result"}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.issuerExpiry, m.certify, m.reloads} {
			if err := reg.Register(c); err != nil {
				var are prometheus.AlreadyRegisteredError
				if errors.As(err, &are) {
					continue
				}
				return nil, err
			}
		}
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
