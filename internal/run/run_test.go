package run

import (
	"context"
	"errors"
	"testing"
	"time"
)

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
