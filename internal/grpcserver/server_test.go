package grpcserver

import (
	"context"
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/meridian-mesh/meridian/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.Main(m, nil)) }

// wait waits for Serve's result; a stop held by grpc's 120 s connection timeout fails it.
func wait(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(60 * time.Second):
		t.Fatal("Serve did not return within 60s of its stop")
		return nil
	}
}

// TestStopWithStalledConnection: a client that connects and sends nothing (a stalled or
// half-open connection) held grpc's GracefulStop and Stop alike until grpc's 120 s
// connection timeout. The forced stop after grace closes it, so Serve returns, and an open
// stream is cut then rather than served on.
func TestStopWithStalledConnection(t *testing.T) {
	srv := New(nil)
	healthpb.RegisterHealthServer(srv, health.NewServer())
	lis := &signalListener{Listener: testutil.Listen(t), accepted: make(chan struct{}, 8)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, srv, lis, 100*time.Millisecond) }()

	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	wctx, wcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer wcancel()
	stream, err := healthpb.NewHealthClient(cc).Watch(wctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != nil {
		t.Fatal(err)
	}
	<-lis.accepted // the stream's connection
	stalled, err := net.Dial("tcp", lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer stalled.Close()
	select { // the server holds it before it stops
	case <-lis.accepted:
	case <-time.After(30 * time.Second):
		t.Fatal("the server did not accept the stalled connection within 30s")
	}
	cancel()
	if err := wait(t, done); err != nil {
		t.Fatalf("Serve: %v", err)
	}
	if _, err := stream.Recv(); err == nil {
		t.Error("the stream still delivers after Serve returned")
	}
}

// signalListener sends on accepted for each connection it accepts.
type signalListener struct {
	net.Listener
	accepted chan struct{}
}

func (l *signalListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.accepted <- struct{}{}
	}
	return c, err
}

// TestOneListenerFailingStopsAll: when one listener fails, Serve stops the server on the
// others too (a second listener served on, with nothing to stop it) and returns the error.
func TestOneListenerFailingStopsAll(t *testing.T) {
	srv := New(nil)
	lis, local := testutil.Listen(t), testutil.Listen(t)
	done := make(chan error, 1)
	go func() { done <- Serve(context.Background(), srv, lis, 100*time.Millisecond, local) }()
	testutil.Eventually(t, 10*time.Second, "the local listener to serve", func() bool {
		c, err := net.Dial("tcp", local.Addr().String())
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	_ = lis.Close() // its Accept fails
	if err := wait(t, done); err == nil || errors.Is(err, grpc.ErrServerStopped) {
		t.Errorf("Serve = %v, want the failed listener's error", err)
	}
	if c, err := net.DialTimeout("tcp", local.Addr().String(), time.Second); err == nil {
		c.Close()
		t.Error("the other listener still accepts after Serve returned")
	}
}

// wrapped is a connection that wraps another, as the local listener's are.
type wrapped struct{ net.Conn }

func (w wrapped) NetConn() net.Conn { return w.Conn }

type wrappingListener struct{ net.Listener }

func (l wrappingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return wrapped{c}, nil
}

// TestTrackedConnectionsPruned: connections closed since are pruned as new ones come, so
// the tracking holds about the open ones, not every connection the process ever accepted;
// those a listener wraps (the local listener marks its own) too, read through NetConn.
func TestTrackedConnectionsPruned(t *testing.T) {
	for name, wrap := range map[string]func(net.Listener) net.Listener{
		"plain":   func(l net.Listener) net.Listener { return l },
		"wrapped": func(l net.Listener) net.Listener { return wrappingListener{l} },
	} {
		var a accepted
		lis := a.track(wrap(testutil.Listen(t)))
		go func() {
			for range 500 {
				c, err := net.Dial("tcp", lis.Addr().String())
				if err != nil {
					return
				}
				c.Close()
			}
		}()
		for range 500 {
			c, err := lis.Accept()
			if err != nil {
				t.Fatal(err)
			}
			c.Close()
		}
		lis.Close()
		a.mu.Lock()
		if len(a.conns) > 64 {
			t.Errorf("%s: %d connections tracked after 500 were accepted and closed, want at most 64", name, len(a.conns))
		}
		a.mu.Unlock()
	}
}
