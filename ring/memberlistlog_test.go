package ring

import (
	"sync/atomic"
	"testing"

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
