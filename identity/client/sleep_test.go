package client

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// TestSleepUntilFollowsTheWallClock: the wait before a renewal follows the wall clock. Go's
// timers count monotonic time, which stops while the host is suspended, so a 24-hour
// certificate whose renewal was due at 16.8 hours, on a host that slept 10 hours, was renewed
// at 26.8 hours: expired for 2.8. Here the wall clock jumps an hour (the host wakes), and the
// wait ends within a step.
func TestSleepUntilFollowsTheWallClock(t *testing.T) {
	start := time.Now()
	var jumped atomic.Bool
	now := func() time.Time {
		if jumped.Load() {
			return time.Now().Add(time.Hour)
		}
		return time.Now()
	}
	done := make(chan bool, 1)
	go func() { done <- sleepUntil(context.Background(), start.Add(30*time.Minute), 10*time.Millisecond, now) }()
	jumped.Store(true)
	select {
	case ok := <-done:
		if !ok {
			t.Fatal("sleepUntil = false without a cancelled context")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the wait did not end after the wall clock passed its deadline")
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { done <- sleepUntil(ctx, time.Now().Add(time.Hour), time.Minute, time.Now) }()
	cancel()
	select {
	case ok := <-done:
		if ok {
			t.Error("sleepUntil = true after its context was cancelled")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the wait did not end when its context was cancelled")
	}
}
