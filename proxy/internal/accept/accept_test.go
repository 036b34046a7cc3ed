package accept

import (
	"context"
	"errors"
	"net"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/meridian-mesh/meridian/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.Main(m, nil)) }

const wait = 10 * time.Second

var errFailed = errors.New("accept failed")

// failing is a loopback listener whose Accept first returns the errors queued on errs.
type failing struct {
	net.Listener
	errs chan error
}

func newFailing(t *testing.T) *failing {
	return &failing{Listener: testutil.Listen(t), errs: make(chan error, 16)}
}

func (l *failing) Accept() (net.Conn, error) {
	select {
	case err := <-l.errs:
		return nil, err
	default:
		return l.Listener.Accept()
	}
}

// run runs Loop on lis until it returns; the result arrives on the channel.
func run(ctx context.Context, lis net.Listener, retry func(error) bool, onRetry func(error, time.Duration), serve func(net.Conn)) <-chan error {
	done := make(chan error, 1)
	go func() { done <- Loop(ctx, lis, retry, onRetry, serve) }()
	return done
}

// TestLoopRetriesWithBackoff: failures that retry accepts are retried after 5 ms, then
// 10 ms; a connection accepted resets the backoff; closing the listener ends the loop
// without an error.
func TestLoopRetriesWithBackoff(t *testing.T) {
	lis := newFailing(t)
	lis.errs <- errFailed
	lis.errs <- errFailed
	var backoffs []time.Duration // Loop's until it returns
	served := make(chan net.Conn, 2)
	done := run(context.Background(), lis, func(error) bool { return true }, func(err error, d time.Duration) {
		if !errors.Is(err, errFailed) {
			t.Errorf("onRetry got %v", err)
		}
		backoffs = append(backoffs, d)
	}, func(c net.Conn) { served <- c })
	for i := range 2 {
		c, err := net.DialTimeout("tcp", lis.Addr().String(), wait)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		s := testutil.Recv(t, served, wait, "the accepted connection")
		_ = s.Close()
		if i == 0 {
			lis.errs <- errFailed // after a connection: the backoff starts again
		}
	}
	_ = lis.Close()
	if err := testutil.Recv(t, done, wait, "Loop to return"); err != nil {
		t.Errorf("Loop after Close: %v", err)
	}
	if want := []time.Duration{5 * time.Millisecond, 10 * time.Millisecond, 5 * time.Millisecond}; !slices.Equal(backoffs, want) {
		t.Errorf("backoffs %v, want %v", backoffs, want)
	}
}

// TestLoopBackoffIsBounded: consecutive failures double the backoff up to a second.
func TestLoopBackoffIsBounded(t *testing.T) {
	lis := newFailing(t)
	for range 9 {
		lis.errs <- errFailed
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var backoffs []time.Duration
	done := run(ctx, lis, func(error) bool { return true }, func(_ error, d time.Duration) {
		backoffs = append(backoffs, d)
		if d == time.Second {
			cancel() // ends the wait at once
		}
	}, func(c net.Conn) { _ = c.Close() })
	if err := testutil.Recv(t, done, wait, "Loop to return"); err != nil {
		t.Errorf("Loop after its context ended: %v", err)
	}
	want := []time.Duration{5, 10, 20, 40, 80, 160, 320, 640}
	for i := range want {
		want[i] *= time.Millisecond
	}
	if want = append(want, time.Second); !slices.Equal(backoffs, want) {
		t.Errorf("backoffs %v, want %v", backoffs, want)
	}
	_ = lis.Close()
}

// TestLoopReturnsWhatItDoesNotRetry: an error retry refuses ends the loop with it.
func TestLoopReturnsWhatItDoesNotRetry(t *testing.T) {
	lis := newFailing(t)
	lis.errs <- errFailed
	done := run(context.Background(), lis, func(err error) bool { return !errors.Is(err, errFailed) },
		func(err error, _ time.Duration) { t.Errorf("retried %v", err) }, func(c net.Conn) { _ = c.Close() })
	if err := testutil.Recv(t, done, wait, "Loop to return"); !errors.Is(err, errFailed) {
		t.Errorf("Loop returned %v, want %v", err, errFailed)
	}
	_ = lis.Close()
}
