package testutil

import (
	"context"
	"sync"
	"testing"
	"time"
)

// StopWithin is how long the helpers here wait for a goroutine to return once it is told to
// stop: a bound on waiting (generous, for -race on a loaded machine), not a performance check.
const StopWithin = 10 * time.Second

// Go runs run on its own goroutine with a context that is cancelled when t ends (before
// the cleanups registered earlier run), then waits for run to return: t fails when run
// returns an error or does not return within StopWithin. what names run in the failures.
func Go(t testing.TB, what string, run func(ctx context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := Recv(t, done, StopWithin, what+" to return after its context ended"); err != nil {
			t.Errorf("%s: %v", what, err)
		}
	})
}

// Wait calls wait (a WaitGroup's Wait, a function that blocks until work ends) and fails t
// (Fatalf) with what when it has not returned within d. wait runs on a goroutine of its own,
// which is left blocked when the deadline passes; it may end with runtime.Goexit.
func Wait(t testing.TB, within time.Duration, what string, wait func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		wait()
	}()
	timer := time.NewTimer(within)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
		t.Fatalf("timed out after %v waiting for %s", within, what)
	}
}

// GoAll runs each of fns on its own goroutine with one context, until the test ends or it
// calls the stop returned (then the cleanup does nothing more); stop cancels the context
// and waits, within twice StopWithin, for every fn to return. Their errors are ignored:
// GoAll runs servers a test may stop in any way. what names them in the failure.
func GoAll(t testing.TB, what string, fns ...func(context.Context) error) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, fn := range fns {
		wg.Add(1)
		go func() { defer wg.Done(); _ = fn(ctx) }()
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			Wait(t, 2*StopWithin, what+" to stop", wg.Wait)
		})
	}
	t.Cleanup(stop)
	return stop
}
