package testutil

import (
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

func TestGatheredAndHistogramSamples(t *testing.T) {
	reg := prometheus.NewRegistry()
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "lag_seconds"}, []string{"kind"})
	reg.MustRegister(h)
	h.WithLabelValues("a").Observe(1)
	h.WithLabelValues("a").Observe(2)
	h.WithLabelValues("b").Observe(3)
	if got := len(Gathered(t, reg, "lag_seconds")); got != 2 {
		t.Fatalf("Gathered: %d series, want 2", got)
	}
	if got := HistogramSamples(t, reg, "lag_seconds"); got != 3 {
		t.Fatalf("HistogramSamples = %d, want 3", got)
	}
	if got := Gathered(t, reg, "absent"); got != nil {
		t.Fatalf("Gathered of an absent family: %v", got)
	}
	if got := HistogramSamples(t, reg, "absent"); got != 0 {
		t.Fatalf("HistogramSamples of an absent family = %d", got)
	}
	broken := prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) { return nil, errors.New("broken") })
	wantFailure(t, check(t, func(r *recorder) { Gathered(r, broken, "x") }), "gather metrics: broken")
}
