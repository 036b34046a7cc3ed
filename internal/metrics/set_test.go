package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// build creates one metric of each kind on s.
func build(s *Set) (prometheus.Counter, *prometheus.CounterVec, prometheus.Gauge, *prometheus.GaugeVec, prometheus.Histogram) {
	s.GaugeFunc("f", "a gauge func", func() float64 { return 7 })
	return s.Counter("c", "a counter"), s.CounterVec("cv", "a counter vec", "kind"),
		s.Gauge("g", "a gauge"), s.GaugeVec("gv", "a gauge vec", "a", "b"),
		s.Histogram("h", "a histogram", []float64{1, 2})
}

func TestSharedReuses(t *testing.T) {
	reg := prometheus.NewRegistry()
	a, b := Shared(reg), Shared(reg)
	c1, cv1, g1, gv1, h1 := build(a)
	c2, cv2, g2, gv2, h2 := build(b)
	if err := errJoin(a, b); err != nil {
		t.Fatal(err)
	}
	c1.Inc()
	cv1.WithLabelValues("x").Inc()
	g1.Set(3)
	gv1.WithLabelValues("1", "2").Set(4)
	h1.Observe(1.5)
	if testutil.ToFloat64(c2) != 1 || testutil.ToFloat64(cv2.WithLabelValues("x")) != 1 ||
		testutil.ToFloat64(g2) != 3 || testutil.ToFloat64(gv2.WithLabelValues("1", "2")) != 4 {
		t.Error("the second Set does not share the first one's collectors")
	}
	if n := testutil.CollectAndCount(h2, "h"); n != 1 {
		t.Errorf("histogram h: %d series", n)
	}
	want := `# HELP f a gauge func
# TYPE f gauge
f 7
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "f"); err != nil {
		t.Error(err)
	}
}

func TestClashIsReported(t *testing.T) {
	for _, mk := range []func(prometheus.Registerer) *Set{Shared, Exclusive} {
		reg := prometheus.NewRegistry()
		reg.MustRegister(prometheus.NewGauge(prometheus.GaugeOpts{Name: "c", Help: "someone else's"}))
		s := mk(reg)
		c := s.Counter("c", "a counter")
		c.Inc() // works, unregistered
		if err := s.Err(); err == nil || !strings.Contains(err.Error(), "register c") {
			t.Errorf("exclusive=%v: Err = %v, want the clash on c", s.exclusive, err)
		}
	}
}

func TestExclusive(t *testing.T) {
	reg := prometheus.NewRegistry()
	a := Exclusive(reg)
	build(a)
	if err := a.Err(); err != nil {
		t.Fatal(err)
	}
	b := Exclusive(reg)
	b.Counter("other", "registered, then undone")
	build(b)
	err := b.Err()
	for _, name := range []string{"c", "cv", "g", "gv", "h", "f"} {
		if err == nil || !strings.Contains(err.Error(), "register "+name+":") {
			t.Errorf("Err = %v, want one error for %s", err, name)
		}
	}
	b.Unregister()
	if n, _ := testutil.GatherAndCount(reg, "other"); n != 0 {
		t.Errorf("Unregister left %q registered", "other")
	}
	if n, _ := testutil.GatherAndCount(reg, "f"); n != 1 {
		t.Errorf("Unregister removed the first Set's collectors")
	}
	a.Unregister()
	if n, _ := testutil.GatherAndCount(reg); n != 0 {
		t.Errorf("after both Unregister: %d series", n)
	}
}

func TestNilRegisterer(t *testing.T) {
	s := Exclusive(nil)
	c, _, _, _, _ := build(s)
	c.Inc()
	s.Unregister()
	if s.Err() != nil || testutil.ToFloat64(c) != 1 {
		t.Error("a Set without a Registerer must give working, unregistered collectors")
	}
}

func errJoin(sets ...*Set) error {
	for _, s := range sets {
		if err := s.Err(); err != nil {
			return err
		}
	}
	return nil
}
