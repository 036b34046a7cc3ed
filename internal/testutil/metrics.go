package testutil

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Gathered returns the series of the metric family name that g gathers (nil when it has no
// such family), failing t (Fatalf) when g cannot gather.
func Gathered(t testing.TB, g prometheus.Gatherer, name string) []*dto.Metric {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatalf("gather metrics: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()
		}
	}
	return nil
}

// HistogramSamples returns how many observations the histogram family name on g holds,
// summed over its series (0 when g has no such family).
func HistogramSamples(t testing.TB, g prometheus.Gatherer, name string) uint64 {
	t.Helper()
	var n uint64
	for _, m := range Gathered(t, g, name) {
		n += m.GetHistogram().GetSampleCount()
	}
	return n
}
