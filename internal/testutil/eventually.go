package testutil

import (
	"testing"
	"time"
)

// PollInterval is how often Eventually checks its condition.
const PollInterval = 10 * time.Millisecond

// Eventually calls cond every PollInterval until it returns true, and fails t (Fatalf) with
// what when it has not within the deadline. cond runs on the calling goroutine.
func Eventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	EventuallyEvery(t, within, PollInterval, what, cond)
}

// EventuallyEvery is Eventually calling cond every interval: for a condition that costs a
// request to a shared server (the test API server) or creates something each time.
func EventuallyEvery(t testing.TB, within, every time.Duration, what string, cond func() bool) {
	t.Helper()
	if !poll(within, every, cond) {
		t.Fatalf("timed out after %v waiting for %s", within, what)
	}
}

// EventuallyNoError is Eventually for a check that says what is still wrong: it calls check
// until it returns nil, and on the deadline fails t with the last error.
func EventuallyNoError(t testing.TB, within time.Duration, what string, check func() error) {
	t.Helper()
	var last error
	if !poll(within, PollInterval, func() bool { last = check(); return last == nil }) {
		t.Fatalf("timed out after %v waiting for %s: %v", within, what, last)
	}
}

// Never calls cond every PollInterval for the whole of d and fails t at once if it ever
// returns true: for asserting that something does not happen within a window.
func Never(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	if poll(d, PollInterval, cond) {
		t.Fatalf("%s happened; it must not", what)
	}
}

// poll calls cond every interval and reports whether it returned true before d elapsed
// (cond is always called once).
func poll(d, every time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		if cond() {
			return true
		}
		if !time.Now().Before(deadline) {
			return false
		}
		<-tick.C
	}
}

// Recv waits for one value from ch, failing t when none arrives within d or ch is closed.
func Recv[T any](t testing.TB, ch <-chan T, within time.Duration, what string) T {
	t.Helper()
	timer := time.NewTimer(within)
	defer timer.Stop()
	select {
	case v, ok := <-ch:
		if !ok {
			t.Fatalf("%s: channel closed", what)
		}
		return v
	case <-timer.C:
		t.Fatalf("timed out after %v waiting for %s", within, what)
	}
	panic("unreachable")
}
