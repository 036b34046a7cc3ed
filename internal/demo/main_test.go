package demo

import (
	"os"
	"os/signal"
	"syscall"
	"testing"
	"time"

	"github.com/meridian-mesh/meridian/internal/testutil"
)

// childEnvKey makes the test binary act as a child process of the supervisor's tests:
// "sleep" runs until SIGTERM, "stubborn" ignores SIGTERM, "exit3" exits with status 3 at once.
const childEnvKey = "DEMO_TEST_CHILD"

func TestMain(m *testing.M) {
	switch os.Getenv(childEnvKey) {
	case "":
		os.Exit(testutil.Main(m, nil))
	case "sleep":
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, syscall.SIGTERM)
		select {
		case <-ch:
			os.Exit(0)
		case <-time.After(time.Minute): // a bound, should the test lose it
			os.Exit(4)
		}
	case "stubborn":
		signal.Ignore(syscall.SIGTERM)
		time.Sleep(time.Minute)
		os.Exit(4)
	case "exit3":
		os.Exit(3)
	}
	os.Exit(5)
}
