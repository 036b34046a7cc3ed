package shard

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meridian-mesh/meridian/internal/testutil"
	"github.com/meridian-mesh/meridian/shard/source"
)

// failingReplay is a pushSource whose Replay fails while fails is above 0, counting down (an
// API server that does not answer the lists of a gained share).
type failingReplay struct {
	*pushSource
	fails atomic.Int32
	calls atomic.Int32
}

func (s *failingReplay) Replay(ctx context.Context) error {
	s.calls.Add(1)
	if s.fails.Add(-1) >= 0 {
		return errors.New("the API server did not answer")
	}
	return s.pushSource.Replay(ctx)
}

var _ source.Source = (*failingReplay)(nil)

// TestGainedLoadRetried: a load of the services gained on a ring change that fails does not
// hold up the change: it completes, the replica reports not ready, and Run loads the share
// again until a load succeeds (a failed load used to be logged and given up: the gained
// services stayed incomplete until their objects next changed, and the replica ready).
func TestGainedLoadRetried(t *testing.T) {
	r, ms := benchRing()
	src := &failingReplay{pushSource: newPushSource()}
	src.synced.Store(true) // replay waits for the source's first delivery
	rep, err := NewReplica(DefaultConfig(), Deps{Source: src, Membership: staticMembership{r, ms[3]}})
	if err != nil {
		t.Fatal(err)
	}
	f := rep.follow
	f.started.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// Three failures: the change completes after the first, not ready.
	src.fails.Store(3)
	f.apply(ctx, nil, r)
	if got := src.calls.Load(); got != 1 {
		t.Fatalf("the change called Replay %d times, want 1", got)
	}
	if err := rep.Ready(); err == nil || !f.loading() {
		t.Fatalf("after a failed load: Ready %v, loading %v; want not ready", err, f.loading())
	}
	// Run tries again until the fourth load succeeds.
	testutil.Go(t, "follower", f.Run)
	testutil.Eventually(t, 20*time.Second, "the share to be loaded again", func() bool { return rep.Ready() == nil })
	if got := src.calls.Load(); got != 4 {
		t.Fatalf("Replay called %d times, want 4 (3 failures, then success)", got)
	}
}
