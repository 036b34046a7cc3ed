package ring

import (
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// Once memberlist has shut down, the lines of a probe it still had in flight are dropped:
// the caller's logger may be gone (a test's zaptest logger panics when written to after its
// test ended).
func TestMemberlistLogAfterShutdown(t *testing.T) {
	core, logs := observer.New(zap.DebugLevel)
	var shutDown atomic.Bool
	w := memberlistLog{l: zap.New(core), shutDown: &shutDown}
	line := "[ERR] memberlist: Failed to send indirect UDP ping: use of closed network connection\n"
	if _, err := w.Write([]byte(line)); err != nil || logs.Len() != 1 {
		t.Fatalf("before shutdown: %v, %d entries, want 1", err, logs.Len())
	}
	shutDown.Store(true)
	if n, err := w.Write([]byte(line)); n != len(line) || err != nil || logs.Len() != 1 {
		t.Fatalf("after shutdown: Write = %d, %v, and %d entries; want the line dropped", n, err, logs.Len())
	}
}

// Each failure-detector line memberlist (v0.7, state.go) writes is counted under its event,
// and only those lines are.
func TestMemberlistLogDetectorEvents(t *testing.T) {
	w := memberlistLog{l: zap.NewNop(), detector: newDetectorEvents()}
	lines := []struct{ line, event string }{
		{"[INFO] memberlist: Suspect b has failed, no acks received", "suspected"},
		{"[INFO] memberlist: Marking b as failed, suspect timeout reached (2 peer confirmations)", "declared_failed"},
		{"[WARN] memberlist: Refuting a suspect message (from: c)", "refuted_suspicion"},
		{"[WARN] memberlist: Refuting a dead message (from: c)", "refuted_death"},
		{"[ERR] memberlist: Failed fallback TCP ping: dial tcp 127.0.0.1:7946: i/o timeout", "tcp_fallback_failed"},
		{"[DEBUG] memberlist: Failed UDP ping: b (timeout reached)", ""},
		{"[WARN] memberlist: Refuting an alive message for 'a' (127.0.0.1:7946) meta:([] VS [1])", ""},
		{"[INFO] memberlist: Suspect", ""}, // no name: not memberlist's line
	}
	for _, l := range lines {
		if _, err := w.Write([]byte(l.line + "\n")); err != nil {
			t.Fatal(err)
		}
	}
	for _, e := range detectorEvents {
		want := 0.0
		for _, l := range lines {
			if l.event == e.event {
				want++
			}
		}
		if got := testutil.ToFloat64(w.detector.WithLabelValues(e.event)); got != want {
			t.Errorf("%s = %v, want %v", e.event, got, want)
		}
	}
}
