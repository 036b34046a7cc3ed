package bench

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// phase shows the progress of one phase of a run on cfg.Progress. On a terminal it is a bar
// redrawn in place; elsewhere (a file, a pipe, a CI log) it writes one line when the phase is
// done, "shards=2: opening streams: 20000/20000 streams in 3.2s", instead of a line per
// redraw. Its methods are called from one goroutine.
type phase struct {
	bar *progressbar.ProgressBar // on a terminal

	w          io.Writer // elsewhere; nil when there is no bar at all
	desc, unit string
	n, max     int64
	start      time.Time
	finished   bool
}

// newPhase starts a phase of max steps of unit (max -1: of unknown length) described by desc.
func newPhase(cfg Config, max int64, desc, unit string) *phase {
	if cfg.Progress == nil {
		return &phase{}
	}
	return newPhaseOn(cfg.Progress, isTerminal(cfg.Progress), max, desc, unit)
}

func newPhaseOn(w io.Writer, terminal bool, max int64, desc, unit string) *phase {
	if !terminal {
		return &phase{w: w, desc: desc, unit: unit, max: max, start: time.Now()}
	}
	return &phase{bar: progressbar.NewOptions64(max,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription(desc),
		progressbar.OptionSetWidth(30),
		progressbar.OptionThrottle(200*time.Millisecond),
		progressbar.OptionShowCount(),
		progressbar.OptionSetElapsedTime(true),
		progressbar.OptionOnCompletion(func() { fmt.Fprintln(w) }),
	)}
}

// isTerminal reports whether w is a terminal: an *os.File on one.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

func (p *phase) set(n int64) {
	if p.bar != nil {
		_ = p.bar.Set64(n)
	}
	p.n = n
}

// describe changes the bar's description. Off a terminal it does nothing: the line names the
// phase as it started.
func (p *phase) describe(s string) {
	if p.bar != nil {
		p.bar.Describe(s)
	}
}

// done ends the phase (a second call does nothing more).
func (p *phase) done() {
	if p.bar != nil {
		_ = p.bar.Finish()
	}
	if p.w == nil || p.finished {
		return
	}
	p.finished = true
	took := time.Since(p.start).Seconds()
	if p.max < 0 {
		fmt.Fprintf(p.w, "%s in %.1fs\n", p.desc, took)
		return
	}
	unit := ""
	if p.unit != "" {
		unit = " " + p.unit
	}
	fmt.Fprintf(p.w, "%s: %d/%d%s in %.1fs\n", p.desc, p.n, p.max, unit, took)
}
