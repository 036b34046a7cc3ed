package identity_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// counterValue returns identity_certify_requests_total{result,code} from the server's registry.
func counterValue(t testing.TB, s *server, result, code string) float64 {
	t.Helper()
	return sample(t, s.reg, "identity_certify_requests_total", map[string]string{"result": result, "code": code}).GetCounter().GetValue()
}

func gaugeValue(t testing.TB, s *server, name string) float64 {
	t.Helper()
	return sample(t, s.reg, name, nil).GetGauge().GetValue()
}

// sample returns the metric name{labels} gathered from g, or an empty one when absent.
func sample(t testing.TB, g prometheus.Gatherer, name string, labels map[string]string) *dto.Metric {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if labelsMatch(m, labels) {
				return m
			}
		}
	}
	return &dto.Metric{}
}

func labelsMatch(m *dto.Metric, want map[string]string) bool {
	n := 0
	for _, lp := range m.GetLabel() {
		if w, ok := want[lp.GetName()]; ok {
			if w != lp.GetValue() {
				return false
			}
			n++
		}
	}
	return n == len(want)
}
