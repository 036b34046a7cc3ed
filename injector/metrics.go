package injector

import (
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/meridian-mesh/meridian/internal/metrics"
)

// Metrics are the injector's admission counters, named and labelled as Linkerd's:
// owner_kind, namespace, skip, skip_reason, annotation_at, plus one label per
// config.linkerd.io/* override (the part after "/" with "-" as "_") carrying the effective
// value, "" when unset.
type Metrics struct {
	requests  *prometheus.CounterVec
	responses *prometheus.CounterVec
}

var baseLabels = []string{"owner_kind", "namespace", "skip", "skip_reason", "annotation_at"}

func metricLabelName(annotation string) string {
	_, after, _ := strings.Cut(annotation, "/")
	return strings.ReplaceAll(after, "-", "_")
}

func metricLabelNames() []string {
	names := append([]string(nil), baseLabels...)
	for _, a := range ProxyAnnotations {
		names = append(names, metricLabelName(a))
	}
	return names
}

// NewMetrics creates the counters and registers them with reg (when non-nil); a name
// registered already is an error, and then neither is registered.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	names := metricLabelNames()
	s := metrics.Exclusive(reg)
	m := &Metrics{
		requests:  s.CounterVec("proxy_inject_admission_requests_total", "Admission requests received by the proxy injector.", names...),
		responses: s.CounterVec("proxy_inject_admission_responses_total", "Admission responses sent by the proxy injector.", names...),
	}
	if err := s.Err(); err != nil {
		s.Unregister()
		return nil, err
	}
	return m, nil
}

// labelValues builds the label values for one reviewed pod.
func labelValues(owner Owner, namespace string, d Decision, ns Meta, pod map[string]string) []string {
	vals := []string{labelValue(owner.Kind), labelValue(namespace), strconv.FormatBool(!d.Inject), d.Reason, d.AnnotationAt}
	for _, a := range ProxyAnnotations {
		v, _ := lookup(ns, pod, a)
		vals = append(vals, labelValue(v))
	}
	return vals
}

// labelValue bounds a user-supplied label value: valid UTF-8, at most 64 bytes.
func labelValue(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) > 64 {
		s = strings.ToValidUTF8(s[:64], "")
	}
	return s
}

func (m *Metrics) observe(vals []string) {
	if m == nil {
		return
	}
	m.requests.WithLabelValues(vals...).Inc()
	m.responses.WithLabelValues(vals...).Inc()
}
