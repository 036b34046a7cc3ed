package testutil

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

func TestMain(m *testing.M) { os.Exit(Main(m, nil)) }

// recorder is a testing.TB that records failures instead of failing the real test, ends the
// goroutine on Fatalf as testing does, and keeps its cleanups until end runs them.
type recorder struct {
	testing.TB
	mu       sync.Mutex
	failures []string
	cleanups []func()
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failures = append(r.failures, fmt.Sprintf(format, args...))
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	runtime.Goexit()
}

func (r *recorder) Cleanup(f func()) { r.cleanups = append(r.cleanups, f) }

// end runs the cleanups, last registered first.
func (r *recorder) end() {
	for i := len(r.cleanups) - 1; i >= 0; i-- {
		r.cleanups[i]()
	}
}

// check runs f with a fresh recorder on a goroutine of its own (so that Fatalf can end it)
// and returns what f reported.
func check(t *testing.T, f func(r *recorder)) []string {
	t.Helper()
	r := &recorder{TB: t}
	Wait(t, 10*time.Second, "the check to end", func() { f(r) })
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failures
}

func wantFailure(t *testing.T, got []string, part string) {
	t.Helper()
	if len(got) != 1 || !strings.Contains(got[0], part) {
		t.Fatalf("failures %q, want one containing %q", got, part)
	}
}

func TestEventually(t *testing.T) {
	var n atomic.Int32
	Eventually(t, 10*time.Second, "the third call", func() bool { return n.Add(1) == 3 })
	n.Store(0)
	EventuallyEvery(t, 10*time.Second, 50*time.Millisecond, "the third paced call", func() bool { return n.Add(1) == 3 })
	wantFailure(t, check(t, func(r *recorder) {
		EventuallyEvery(r, 30*time.Millisecond, 5*time.Millisecond, "nothing", func() bool { return false })
	}), "timed out after 30ms waiting for nothing")
	wantFailure(t, check(t, func(r *recorder) {
		Eventually(r, 30*time.Millisecond, "nothing", func() bool { return false })
	}), "timed out after 30ms waiting for nothing")
	wantFailure(t, check(t, func(r *recorder) {
		EventuallyNoError(r, 30*time.Millisecond, "a fix", func() error { return errors.New("still broken") })
	}), "waiting for a fix: still broken")
}

func TestNever(t *testing.T) {
	Never(t, 30*time.Millisecond, "a false condition holding", func() bool { return false })
	var n atomic.Int32
	wantFailure(t, check(t, func(r *recorder) {
		Never(r, 10*time.Second, "the second call", func() bool { return n.Add(1) == 2 })
	}), "the second call happened")
}

func TestRecvAndWait(t *testing.T) {
	ch := make(chan int, 1)
	ch <- 7
	if got := Recv(t, ch, time.Second, "a value"); got != 7 {
		t.Fatalf("Recv = %d, want 7", got)
	}
	wantFailure(t, check(t, func(r *recorder) { Recv(r, ch, 30*time.Millisecond, "another value") }),
		"timed out after 30ms waiting for another value")
	close(ch)
	wantFailure(t, check(t, func(r *recorder) { Recv(r, ch, time.Second, "a value") }), "a value: channel closed")

	var wg sync.WaitGroup
	wg.Add(1)
	go wg.Done()
	Wait(t, 10*time.Second, "the WaitGroup", wg.Wait)
	block := make(chan struct{})
	defer close(block) // lets the abandoned wait end
	wantFailure(t, check(t, func(r *recorder) { Wait(r, 30*time.Millisecond, "a blocked call", func() { <-block }) }),
		"timed out after 30ms waiting for a blocked call")
}

func TestGoCancelsAndWaits(t *testing.T) {
	var stopped atomic.Bool
	got := check(t, func(r *recorder) {
		Go(r, "worker", func(ctx context.Context) error {
			<-ctx.Done()
			stopped.Store(true)
			return errors.New("boom")
		})
		r.end()
	})
	if !stopped.Load() {
		t.Fatal("the goroutine had not returned when the cleanup did")
	}
	wantFailure(t, got, "worker: boom")
}

func TestServeDialAndWantStatus(t *testing.T) {
	addr := ServeGRPC(t, func(s *grpc.Server) { healthpb.RegisterHealthServer(s, health.NewServer()) })
	client := healthpb.NewHealthClient(DialGRPC(t, addr))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rsp, err := client.Check(ctx, &healthpb.HealthCheckRequest{})
	WantStatus(t, err, codes.OK, "")
	if rsp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health = %v, want SERVING", rsp.GetStatus())
	}
	_, err = client.Check(ctx, &healthpb.HealthCheckRequest{Service: "absent"})
	WantStatus(t, err, codes.NotFound, "unknown service")
	wantFailure(t, check(t, func(r *recorder) { WantStatus(r, status.Error(codes.Internal, "boom"), codes.NotFound, "") }),
		`got Internal "boom", want NotFound`)
}
