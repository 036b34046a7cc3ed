package injector

import (
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/meridian-mesh/meridian/internal/metrics"
)

// Metrics are the injector's admission counters, named and labelled as Linkerd's:
// owner_kind, namespace, skip, skip_reason, annotation_at, plus one label per
// config.linkerd.io/* override (the part after "/" with "-" as "_"). Unlike Linkerd's, that
// label never carries the annotation's value, which anyone who creates a pod chooses (one
// series per value would let them grow the registry without bound): it is "" when the
// annotation is absent, "set" when it applies and "invalid" when it was ignored. Every label
// value is thus from a closed set or bounded by the cluster (namespaces, owner kinds).
//
// proxy_inject_ignored_annotations_total{annotation, at} counts the annotations ignored
// because they were invalid (annotation is the key, at workload or namespace).
type Metrics struct {
	requests  *prometheus.CounterVec
	responses *prometheus.CounterVec
	ignored   *prometheus.CounterVec
}

// Values of the per-annotation labels.
const (
	annotationSet     = "set"
	annotationInvalid = "invalid"
)

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
		ignored: s.CounterVec("proxy_inject_ignored_annotations_total",
			"Proxy annotations the injector ignored because their values are invalid (the pod was injected without them).", "annotation", "at"),
	}
	if err := s.Err(); err != nil {
		s.Unregister()
		return nil, err
	}
	return m, nil
}

// labelValues builds the label values for one reviewed pod; warns are the annotations that
// were ignored.
func labelValues(owner Owner, namespace string, d Decision, ns Meta, pod map[string]string, warns []Warning) []string {
	vals := []string{labelValue(owner.Kind), labelValue(namespace), strconv.FormatBool(!d.Inject), d.Reason, d.AnnotationAt}
	for _, a := range ProxyAnnotations {
		state := ""
		if _, ok := lookup(ns, pod, a); ok {
			state = annotationSet
		}
		for _, w := range warns {
			if w.Annotation == a {
				state = annotationInvalid
			}
		}
		vals = append(vals, state)
	}
	return vals
}

// labelValue bounds a label value that comes from the cluster: valid UTF-8, at most 64 bytes.
func labelValue(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) > 64 {
		s = strings.ToValidUTF8(s[:64], "")
	}
	return s
}

func (m *Metrics) observe(vals []string, warns []Warning) {
	if m == nil {
		return
	}
	m.requests.WithLabelValues(vals...).Inc()
	m.responses.WithLabelValues(vals...).Inc()
	for _, w := range warns {
		if !w.Kept {
			m.ignored.WithLabelValues(w.Annotation, w.At).Inc()
		}
	}
}
