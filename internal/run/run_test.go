package run

import (
	"context"
	"errors"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meridian-mesh/meridian/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.Main(m, nil)) }

func TestAllStopsTheRestOnFirstError(t *testing.T) {
	boom := errors.New("boom")
	stopped := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- All(context.Background(),
			func(ctx context.Context) error { <-ctx.Done(); close(stopped); return nil },
			func(context.Context) error { return boom },
		)
	}()
	select {
	case err := <-done:
		if !errors.Is(err, boom) {
			t.Fatalf("All = %v, want boom", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("All did not return")
	}
	select {
	case <-stopped:
	default:
		t.Fatal("the other function was not stopped before All returned")
	}
}

func TestAllReturnsNilWhenCtxEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := All(ctx, func(ctx context.Context) error { <-ctx.Done(); return nil }); err != nil {
		t.Fatal(err)
	}
}

type fakeComponent struct {
	ready    error
	warnings []string
	run      func(ctx context.Context) error
}

func (f *fakeComponent) Run(ctx context.Context) error {
	if f.run != nil {
		return f.run(ctx)
	}
	<-ctx.Done()
	return nil
}
func (f *fakeComponent) Ready() error       { return f.ready }
func (f *fakeComponent) Warnings() []string { return f.warnings }

func TestGroupReadinessAndWarnings(t *testing.T) {
	var g Group
	src := &fakeComponent{ready: errors.New("source not synced"), warnings: []string{"a.yaml:3: bad"}}
	g.Add("source", src)
	g.Add("server", &fakeComponent{})
	if err := g.Ready(); err == nil || err.Error() != "starting" {
		t.Fatalf("Ready before Run = %v, want starting", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	testutil.Eventually(t, 5*time.Second, "the group to report the source", func() bool {
		err := g.Ready()
		return err != nil && err.Error() == "source: source not synced"
	})
	if w := g.Warnings(); len(w) != 1 || w[0] != "source: a.yaml:3: bad" {
		t.Errorf("Warnings = %q", w)
	}
	cancel()
	if err := testutil.Recv(t, done, 5*time.Second, "Run to return"); err != nil {
		t.Fatalf("Run = %v", err)
	}
	if err := g.Ready(); err == nil {
		t.Error("Ready after Run = nil, want an error")
	}
}

func TestGroupNamesTheFailingComponent(t *testing.T) {
	var g Group
	boom := errors.New("boom")
	g.Go("policy source", func(context.Context) error { return boom })
	g.Add("server", &fakeComponent{})
	err := g.Run(context.Background())
	if !errors.Is(err, boom) || err.Error() != "policy source: boom" {
		t.Fatalf("Run = %v, want policy source: boom", err)
	}
}

func TestGroupStopIsBounded(t *testing.T) {
	g := Group{StopTimeout: 50 * time.Millisecond}
	release := make(chan struct{})
	defer close(release)
	g.Go("stuck", func(context.Context) error { <-release; return nil })
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := g.Run(ctx)
	if err == nil || err.Error() != "did not stop within 50ms: stuck" {
		t.Fatalf("Run = %v, want a timeout naming stuck", err)
	}
}

// TestGroupStopIsBoundedOnceRunning: the stop timeout also holds when ctx ends while the
// group runs (it used to start only once some component returned: a group whose components
// all outlived ctx waited for them without bound).
func TestGroupStopIsBoundedOnceRunning(t *testing.T) {
	g := Group{StopTimeout: 50 * time.Millisecond}
	release := make(chan struct{})
	defer close(release)
	started := make(chan struct{}, 1)
	g.Go("stuck", func(context.Context) error { started <- struct{}{}; <-release; return nil })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	testutil.Recv(t, started, 5*time.Second, "the component to start")
	cancel()
	err := testutil.Recv(t, done, 5*time.Second, "Run to return after its stop timeout")
	if err == nil || err.Error() != "did not stop within 50ms: stuck" {
		t.Fatalf("Run = %v, want a timeout naming stuck", err)
	}
}

func TestGroupFinishedComponentDoesNotStopTheRest(t *testing.T) {
	var g Group
	g.Go("once", func(context.Context) error { return nil })
	stopped := make(chan struct{})
	g.Go("server", func(ctx context.Context) error { <-ctx.Done(); close(stopped); return nil })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	testutil.Never(t, 100*time.Millisecond, "the server stopping before ctx ends", func() bool {
		select {
		case <-stopped:
			return true
		default:
			return false
		}
	})
	cancel()
	if err := testutil.Recv(t, done, 5*time.Second, "Run to return"); err != nil {
		t.Fatal(err)
	}
}

// TestEvery: fn runs every period until ctx ends, and Every returns then.
func TestEvery(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var n atomic.Int32
	done := make(chan struct{})
	go func() {
		defer close(done)
		Every(ctx, time.Millisecond, func() {
			if n.Add(1) == 3 {
				cancel()
			}
		})
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Every did not return when its context ended")
	}
	if n.Load() < 3 {
		t.Errorf("fn ran %d times, want 3", n.Load())
	}
}
