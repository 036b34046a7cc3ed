package outbound

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/meridian-mesh/meridian/internal/testutil"
	"github.com/meridian-mesh/meridian/proxy/internal/proxytest"
)

// blockingApp answers each request once release is closed (or the request ends), after
// telling arrived.
func blockingApp(t testing.TB) (addr string, arrived chan struct{}, release chan struct{}) {
	t.Helper()
	arrived, release = make(chan struct{}, 16), make(chan struct{})
	lis := testutil.Listen(t)
	proxytest.ServeHTTP(t, lis, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		select {
		case <-release:
			_, _ = io.WriteString(w, "done")
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	return lis.Addr().String(), arrived, release
}

// serve runs a new proxy on a loopback listener until the returned cancel; served reports
// Serve's end.
func serve(t testing.TB, cfg Config, deps Deps) (o *Outbound, addr string, cancel context.CancelFunc, served chan error) {
	t.Helper()
	o, err := New(cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	lis := testutil.Listen(t)
	ctx, cancel := context.WithCancel(context.Background())
	served = make(chan error, 1)
	returned := make(chan struct{})
	go func() {
		defer close(returned)
		served <- o.Serve(ctx, lis)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-returned:
		case <-time.After(testutil.StopWithin):
			t.Error("Serve did not return")
		}
	})
	return o, lis.Addr().String(), cancel, served
}

func TestShutdownDrainsInFlightRequests(t *testing.T) {
	app, arrived, release := blockingApp(t)
	r := newFakeResolver()
	r.target(webAuth, plainEndpoint(addrPort(t, mustResolve(t, app))))
	cfg := testConfig()
	cfg.Grace = 30 * time.Second
	o, addr, cancel, served := serve(t, cfg, Deps{Resolver: r})
	testutil.Eventually(t, 10*time.Second, "the listener to be ready", func() bool { return o.Ready() == nil })
	if o.Addr().String() != addr {
		t.Errorf("Addr() = %v, want %s", o.Addr(), addr)
	}
	got := proxytest.GetAsync(proxyClient(t, addr), "http://"+webAuth+"/")
	testutil.Recv(t, arrived, 10*time.Second, "the request to reach the app")

	cancel()
	testutil.Eventually(t, 10*time.Second, "the listener to stop accepting", func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			_ = c.Close()
		}
		return err != nil
	})
	if o.Ready() == nil {
		t.Error("Ready while draining")
	}
	close(release)
	if res := testutil.Recv(t, got, 10*time.Second, "the in-flight response"); res.Err != nil || res.Status != 200 || res.Body != "done" {
		t.Errorf("the in-flight request: %+v, want 200 done", res)
	}
	if err := testutil.Recv(t, served, 10*time.Second, "Serve to return"); err != nil {
		t.Errorf("Serve: %v", err)
	}
}

func TestShutdownClosesWhatOutlivesTheGrace(t *testing.T) {
	app, arrived, _ := blockingApp(t)
	echoAddr := startEcho(t)
	r := newFakeResolver()
	r.target(webAuth, plainEndpoint(addrPort(t, mustResolve(t, app))))
	r.target("redis.shop.svc.cluster.local:6379", plainEndpoint(echoAddr))
	cfg := testConfig()
	cfg.Grace = 100 * time.Millisecond
	_, addr, cancel, served := serve(t, cfg, Deps{Resolver: r})
	got := proxytest.GetAsync(proxyClient(t, addr), "http://"+webAuth+"/")
	testutil.Recv(t, arrived, 10*time.Second, "the request to reach the app")

	// A tunnel that stays open.
	_, br := send(t, addr, "CONNECT redis.shop.svc.cluster.local:6379 HTTP/1.1\r\nHost: x\r\n\r\n")
	if res, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect}); err != nil || res.StatusCode != 200 {
		t.Fatalf("CONNECT: %v %v", res, err)
	}

	cancel()
	if err := testutil.Recv(t, served, testutil.StopWithin, "Serve to return after the grace period"); err != nil {
		t.Errorf("Serve: %v", err)
	}
	if res := testutil.Recv(t, got, 10*time.Second, "the cut request"); res.Err == nil && res.Status == 200 && res.Body == "done" {
		t.Errorf("a request outliving the grace period completed: %+v", res)
	}
	var ne net.Error
	if _, err := io.ReadAll(br); errors.As(err, &ne) && ne.Timeout() {
		t.Errorf("the tunnel stayed open after the grace period")
	}
}

func TestIdleTargetIsReleased(t *testing.T) {
	app := startApp(t, "web-1")
	r := newFakeResolver()
	ft := r.target(webAuth, plainEndpoint(app))
	cfg := testConfig()
	cfg.IdleTimeout = 50 * time.Millisecond
	_, addr := startProxy(t, cfg, Deps{Resolver: r})
	c := proxyClient(t, addr)

	get(t, c, "http://"+webAuth+"/")
	if ft.held.Load() != 1 {
		t.Fatalf("held %d times after a request", ft.held.Load())
	}
	testutil.Eventually(t, 10*time.Second, "the idle target to be released", func() bool { return ft.held.Load() == 0 })
	if res, _ := get(t, c, "http://"+webAuth+"/"); res.StatusCode != 200 || r.resolved(webAuth) != 2 {
		t.Errorf("after the release: %d, resolved %d times (want 2)", res.StatusCode, r.resolved(webAuth))
	}
}

func mustResolve(t testing.TB, addr string) net.Addr {
	t.Helper()
	a, err := net.ResolveTCPAddr("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
