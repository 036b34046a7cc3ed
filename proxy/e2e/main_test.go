package e2e

import (
	"bytes"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/meridian-mesh/meridian/internal/testutil"
)

func TestMain(m *testing.M) {
	code := testutil.Main(m, func(m *testing.M) int {
		code := m.Run()
		settleMemberlist(10 * time.Second)
		return code
	})
	removeBinary()
	os.Exit(code)
}

// settleMemberlist waits (at most d) until no goroutine of memberlist runs: after Shutdown a
// probe in flight still waits for its ack timeout (a few hundred ms, longer on a loaded
// machine) before it returns, which the leak check would otherwise report.
func settleMemberlist(d time.Duration) {
	deadline := time.Now().Add(d)
	buf := make([]byte, 1<<20)
	for time.Now().Before(deadline) {
		n := runtime.Stack(buf, true)
		if !bytes.Contains(buf[:n], []byte("hashicorp/memberlist.")) {
			return
		}
		time.Sleep(20 * time.Millisecond) // polling for goroutines to end: there is no event
	}
}
