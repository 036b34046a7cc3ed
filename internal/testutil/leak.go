package testutil

import (
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// LeakOptions are the goroutines a test binary may leave behind: process-wide daemons that
// libraries start once and never stop. Informers, watches, servers and connections are not
// among them: a test stops what it starts. Add a daemon here only with the library that
// starts it.
func LeakOptions() []goleak.Option {
	return []goleak.Option{
		// klog's flush daemon: k8s.io/klog/v2 (the logging of client-go and apimachinery)
		// starts it on first use and never stops it.
		goleak.IgnoreTopFunction("k8s.io/klog/v2.(*flushDaemon).run.func1"),
	}
}

// Main runs the package's tests with run (m.Run when nil; kubetest.Main in packages that start
// a shared API server) and then fails the binary if goroutines are left over. Use it as:
//
//	func TestMain(m *testing.M) { os.Exit(testutil.Main(m, nil)) }
func Main(m *testing.M, run func(*testing.M) int) int {
	if run == nil {
		run = (*testing.M).Run
	}
	code := run(m)
	if code != 0 {
		return code // the failure is already reported; leaks of a failed run are noise
	}
	// goleak retries for about 2 s. Some goroutines end on their own after the library that
	// started them was stopped (memberlist's Shutdown leaves a probe in flight, which ends
	// when its ack timer fires), and on a loaded machine that can take longer: a goroutine
	// still there after leakGrace is a leak.
	deadline := time.Now().Add(leakGrace)
	for {
		err := goleak.Find(LeakOptions()...)
		if err == nil {
			return 0
		}
		if time.Now().After(deadline) {
			fmt.Fprintf(os.Stderr, "goleak: goroutines left after the tests: %v\n", err)
			return 1
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// leakGrace is how long Main waits for goroutines to end after the tests.
const leakGrace = 10 * time.Second

// VerifyNone fails t at its end if goroutines started during it are still running then.
// Call it first in a test: it ignores the goroutines running when it is called.
func VerifyNone(t *testing.T) {
	opts := append(LeakOptions(), goleak.IgnoreCurrent())
	t.Cleanup(func() { goleak.VerifyNone(t, opts...) })
}
