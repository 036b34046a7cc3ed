package manifest

import (
	"errors"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/meridian-mesh/meridian/internal/metrics"
)

// reporter is the one error policy of every user of the loader: each problem is logged at
// warn once, when it appears, and at info when it clears; manifest_errors{file} counts the
// current problems of each file (the series is removed when the file is clean); and the
// current problems are kept for Errors and Warnings.
type reporter struct {
	log   *zap.Logger
	root  string
	gauge *prometheus.GaugeVec

	// Owned by the goroutine that calls update.
	current map[string]bool // messages of the current problems
	perFile map[string]int  // file -> number of current problems

	errs atomic.Pointer[[]error]
}

func newReporter(root string, reg prometheus.Registerer, log *zap.Logger) *reporter {
	s := metrics.Shared(reg) // another Dir of this process may have registered it: share it
	g := s.GaugeVec("manifest_errors",
		"Current problems of each manifest file (it does not parse or validate, is too large or unreadable, or defines an object defined before; or a value in it is ignored); the last good objects are served meanwhile. The series is removed when the file is clean.",
		"file")
	if err := s.Err(); err != nil {
		log.Warn("cannot register manifest_errors; it is not exported", zap.Error(err))
	}
	return &reporter{log: log, root: root, gauge: g, current: map[string]bool{}, perFile: map[string]int{}}
}

// update records the problems of a scan (sorted by the caller), logging what appeared and
// what cleared since the last one.
func (r *reporter) update(errs []error) {
	now := make(map[string]bool, len(errs))
	perFile := make(map[string]int, len(r.perFile))
	for _, e := range errs {
		msg := e.Error()
		if !r.current[msg] && !now[msg] {
			if fe := (*FileError)(nil); errors.As(e, &fe) && fe.Warning {
				r.log.Warn("manifest value ignored; the object is served without it", zap.String("error", msg))
			} else {
				r.log.Warn("manifest error; the last good state is served", zap.String("error", msg))
			}
		}
		now[msg] = true
		perFile[r.fileOf(e)]++
	}
	for msg := range r.current {
		if !now[msg] {
			r.log.Info("manifest error cleared", zap.String("error", msg))
		}
	}
	for f, n := range perFile {
		r.gauge.WithLabelValues(f).Set(float64(n))
	}
	for f := range r.perFile {
		if _, ok := perFile[f]; !ok {
			r.gauge.DeleteLabelValues(f)
		}
	}
	r.current, r.perFile = now, perFile
	if len(errs) == 0 {
		r.errs.Store(nil)
	} else {
		r.errs.Store(&errs)
	}
}

func (r *reporter) fileOf(err error) string {
	if file, _, ok := Location(err); ok && file != "" {
		return file
	}
	return r.root
}

// errors returns the current problems; the slice must not be modified.
func (r *reporter) errors() []error {
	if p := r.errs.Load(); p != nil {
		return *p
	}
	return nil
}
