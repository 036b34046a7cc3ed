package demo

import (
	"math"
	"strings"
	"testing"
)

// FuzzParseMetrics reads arbitrary text as a /metrics answer: it never panics, and every
// histogram it returns has its buckets in order, ending with +Inf holding the count.
func FuzzParseMetrics(f *testing.F) {
	f.Add(sampleMetrics)
	f.Add("# TYPE h histogram\nh_bucket{le=\"5\"} 1\nh_count 3\n")
	f.Add("# TYPE h histogram\nh_bucket{le=\"+Inf\"} 2\nh_bucket{le=\"1\"} 1\nh_count 2\nh_sum 1\n")
	f.Add("# TYPE g gauge\ng{a=\"\\xff\"} NaN\n")
	f.Add("x{")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		m, err := ParseMetrics(strings.NewReader(s))
		if err != nil {
			return
		}
		for name, ss := range m {
			for _, se := range ss {
				n := len(se.Buckets)
				if n == 0 {
					continue
				}
				for i := 1; i < n; i++ {
					if se.Buckets[i-1].Le > se.Buckets[i].Le {
						t.Fatalf("%s: buckets out of order: %v", name, se.Buckets)
					}
				}
				if !math.IsInf(se.Buckets[n-1].Le, 1) {
					t.Fatalf("%s: last bucket %v is not +Inf", name, se.Buckets[n-1])
				}
			}
		}
	})
}
