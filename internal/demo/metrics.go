package demo

import (
	"fmt"
	"io"
	"math"
	"sort"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Series is one sample of a scraped metric: its labels and value (for a histogram, its count
// and cumulative buckets).
type Series struct {
	Labels  map[string]string
	Value   float64
	Buckets []Bucket // histograms only, by upper bound, cumulative, the last one +Inf
}

// Bucket is a histogram bucket: the count of observations at most Le.
type Bucket struct{ Le, Count float64 }

// Metrics are one scrape: the series of each metric by name. A scrape is never modified once
// made.
type Metrics map[string][]Series

// maxScrape bounds what is read of one /metrics answer.
const maxScrape = 16 << 20

// ParseMetrics reads Prometheus' text format.
func ParseMetrics(r io.Reader) (Metrics, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(io.LimitReader(r, maxScrape))
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	out := make(Metrics, len(fams))
	for name, f := range fams {
		ss := make([]Series, 0, len(f.GetMetric()))
		for _, m := range f.GetMetric() {
			s := Series{Labels: make(map[string]string, len(m.GetLabel()))}
			for _, l := range m.GetLabel() {
				s.Labels[l.GetName()] = l.GetValue()
			}
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				s.Value = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				s.Value = m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				h := m.GetHistogram()
				s.Value = float64(h.GetSampleCount())
				for _, b := range h.GetBucket() {
					s.Buckets = append(s.Buckets, Bucket{Le: b.GetUpperBound(), Count: float64(b.GetCumulativeCount())})
				}
				sort.Slice(s.Buckets, func(i, j int) bool { return s.Buckets[i].Le < s.Buckets[j].Le })
				if n := len(s.Buckets); n == 0 || !math.IsInf(s.Buckets[n-1].Le, 1) {
					s.Buckets = append(s.Buckets, Bucket{Le: math.Inf(1), Count: s.Value})
				}
			default:
				s.Value = m.GetUntyped().GetValue()
			}
			ss = append(ss, s)
		}
		out[name] = ss
	}
	return out, nil
}

// Match says which series to take.
type Match func(labels map[string]string) bool

// Labels matches the series whose labels have all the given values (name, value, name,
// value, ...).
func Labels(kv ...string) Match {
	return func(l map[string]string) bool {
		for i := 0; i+1 < len(kv); i += 2 {
			if l[kv[i]] != kv[i+1] {
				return false
			}
		}
		return true
	}
}

// All matches only when every match does.
func All(ms ...Match) Match {
	return func(l map[string]string) bool {
		for _, m := range ms {
			if !m(l) {
				return false
			}
		}
		return true
	}
}

// Sum adds up the values of name's series that match (all of them with a nil match).
func (m Metrics) Sum(name string, match Match) float64 {
	var v float64
	for _, s := range m[name] {
		if match == nil || match(s.Labels) {
			v += s.Value
		}
	}
	return v
}

// Histogram adds up the buckets of name's matching series (histograms with the same buckets).
func (m Metrics) Histogram(name string, match Match) []Bucket {
	var out []Bucket
	for _, s := range m[name] {
		if match != nil && !match(s.Labels) {
			continue
		}
		if out == nil {
			out = make([]Bucket, len(s.Buckets))
			for i, b := range s.Buckets {
				out[i].Le = b.Le
			}
		}
		for i, b := range s.Buckets {
			if i < len(out) && out[i].Le == b.Le {
				out[i].Count += b.Count
			}
		}
	}
	return out
}

// Values returns the distinct values of label among name's matching series whose value is
// positive, sorted.
func (m Metrics) Values(name, label string, match Match) []string {
	set := map[string]bool{}
	for _, s := range m[name] {
		if s.Value > 0 && (match == nil || match(s.Labels)) {
			set[s.Labels[label]] = true
		}
	}
	out := make([]string, 0, len(set))
	for v := range set {
		out = append(out, v)
	}
	sort.Strings(out)
	return out
}

// Delta is cur's buckets minus prev's (prev may be nil: no observations before).
func Delta(cur, prev []Bucket) []Bucket {
	out := make([]Bucket, len(cur))
	for i, b := range cur {
		out[i] = b
		if i < len(prev) && prev[i].Le == b.Le {
			out[i].Count -= prev[i].Count
		}
	}
	return out
}

// Quantile estimates the q-quantile (0..1) of cumulative buckets as Prometheus'
// histogram_quantile does: linear interpolation inside the bucket that holds it. NaN when
// there are no observations; the highest finite bound when it falls in the +Inf bucket.
func Quantile(q float64, bs []Bucket) float64 {
	if len(bs) == 0 {
		return math.NaN()
	}
	total := bs[len(bs)-1].Count // the +Inf bucket: every observation
	if total <= 0 {
		return math.NaN()
	}
	rank := q * total
	prevLe, prevCount := 0.0, 0.0
	for _, b := range bs {
		if b.Count >= rank {
			if math.IsInf(b.Le, 1) {
				return prevLe
			}
			if b.Count == prevCount {
				return b.Le
			}
			return prevLe + (b.Le-prevLe)*(rank-prevCount)/(b.Count-prevCount)
		}
		prevLe, prevCount = b.Le, b.Count
	}
	return prevLe
}
