package testutil

import (
	"testing"
	"time"

	"go.uber.org/goleak"
)

// RunThenSettle returns a run for Main that runs the tests and then waits, up to within, for
// the goroutines still running to end on their own before Main looks for leaks: for libraries
// whose stop does not wait for work already begun (memberlist's Shutdown does not wait for a
// probe in flight, which ends within its probe interval scaled by its health score, up to 8
// times). Use it as:
//
//	func TestMain(m *testing.M) { os.Exit(testutil.Main(m, testutil.RunThenSettle(10*time.Second))) }
func RunThenSettle(within time.Duration) func(*testing.M) int {
	return func(m *testing.M) int {
		code := m.Run()
		deadline := time.Now().Add(within)
		for goleak.Find(LeakOptions()...) != nil && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		return code
	}
}
