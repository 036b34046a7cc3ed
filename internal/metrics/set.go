package metrics

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Set creates collectors and registers them on one Registerer. It is not safe for
// concurrent use; a component builds its metrics with it once, then keeps the collectors.
type Set struct {
	reg       prometheus.Registerer
	exclusive bool
	added     []prometheus.Collector // registered by this Set, for Unregister
	errs      []error
}

// Shared returns a Set that registers on reg (nil: nothing is registered) and uses a
// collector of the same name and type already registered there in place of a new one.
func Shared(reg prometheus.Registerer) *Set { return &Set{reg: reg} }

// Exclusive returns a Set that registers on reg (nil: nothing is registered); a name already
// registered there is an error, reported by Err.
func Exclusive(reg prometheus.Registerer) *Set { return &Set{reg: reg, exclusive: true} }

// Err returns the registration errors so far (joined), or nil.
func (s *Set) Err() error { return errors.Join(s.errs...) }

// Unregister unregisters every collector this Set registered (not those it reused).
func (s *Set) Unregister() {
	for _, c := range s.added {
		s.reg.Unregister(c)
	}
	s.added = nil
}

// add registers c, named name, on s's Registerer and returns the collector to use: c, or with
// a Shared Set the collector of the same name and type registered before. When c cannot be
// registered it is returned unregistered and the error is kept for Err.
func add[C prometheus.Collector](s *Set, name string, c C) C {
	if s.reg == nil {
		return c
	}
	err := s.reg.Register(c)
	if err == nil {
		s.added = append(s.added, c)
		return c
	}
	var are prometheus.AlreadyRegisteredError
	if !s.exclusive && errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing
		}
	}
	s.errs = append(s.errs, fmt.Errorf("register %s: %w", name, err))
	return c
}

// Counter returns the counter name.
func (s *Set) Counter(name, help string) prometheus.Counter {
	return add(s, name, prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help}))
}

// CounterVec returns the counter name with the given labels.
func (s *Set) CounterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return add(s, name, prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels))
}

// Gauge returns the gauge name.
func (s *Set) Gauge(name, help string) prometheus.Gauge {
	return add(s, name, prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help}))
}

// GaugeVec returns the gauge name with the given labels.
func (s *Set) GaugeVec(name, help string, labels ...string) *prometheus.GaugeVec {
	return add(s, name, prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels))
}

// GaugeFunc returns the gauge name whose value is f's at each scrape (with a Shared Set, a
// gauge registered before keeps its own function).
func (s *Set) GaugeFunc(name, help string, f func() float64) prometheus.GaugeFunc {
	return add(s, name, prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f))
}

// Histogram returns the histogram name with the given buckets (nil: Prometheus's defaults).
func (s *Set) Histogram(name, help string, buckets []float64) prometheus.Histogram {
	return add(s, name, prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}))
}
