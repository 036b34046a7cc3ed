package shard

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meridian-mesh/meridian/shard/source"
)

// failingReplay is a pushSource whose Replay fails its first fails calls (an API server that
// does not answer the lists of a gained share).
type failingReplay struct {
	*pushSource
	fails int32
	calls atomic.Int32
}

func (s *failingReplay) Replay(ctx context.Context) error {
	if s.calls.Add(1) <= s.fails {
		return errors.New("the API server did not answer")
	}
	return s.pushSource.Replay(ctx)
}

var _ source.Source = (*failingReplay)(nil)

// TestGainedLoadRetried: a load of the services gained on a ring change that fails is tried
// again until it succeeds (it used to be logged and given up, and the gained services stayed
// incomplete until their objects next changed); a context that ends stops the retries.
func TestGainedLoadRetried(t *testing.T) {
	r, ms := benchRing()
	src := &failingReplay{pushSource: newPushSource(), fails: 3}
	src.synced.Store(true) // replay waits for the source's first delivery
	rep, err := NewReplica(DefaultConfig(), Deps{Source: src, Membership: staticMembership{r, ms[3]}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		rep.follow.replay(ctx, nil)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatal("the retried load did not end")
	}
	if got := src.calls.Load(); got != 4 {
		t.Fatalf("Replay called %d times, want 4 (3 failures, then success)", got)
	}

	// Always failing: the retries end with the context.
	src.fails = 1 << 30
	src.calls.Store(0)
	short, stop := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer stop()
	done = make(chan struct{})
	go func() {
		defer close(done)
		rep.follow.replay(short, nil)
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the retries did not end with their context")
	}
	if got := src.calls.Load(); got < 2 {
		t.Fatalf("Replay called %d times in half a second of failures, want retries", got)
	}
}
