package inbound

import (
	"context"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/meridian-mesh/meridian/internal/testutil"
	"github.com/meridian-mesh/meridian/proxy/internal/proxytest"
	"github.com/meridian-mesh/meridian/proxy/transportheader"
)

// slowApp answers /slow once release is closed (or the request is cancelled), after
// signalling entered; other paths at once.
func slowApp(t *testing.T) (port uint16, entered chan struct{}, release chan struct{}) {
	t.Helper()
	entered, release = make(chan struct{}, 8), make(chan struct{})
	lis := testutil.Listen(t)
	proxytest.Serve(t, &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			entered <- struct{}{}
			select {
			case <-release:
			case <-r.Context().Done():
				return
			}
		}
		_, _ = io.WriteString(w, "done")
	})}, lis)
	return uint16(lis.Addr().(*net.TCPAddr).Port), entered, release
}

// running is a Run in progress; done is closed when it returned err.
type running struct {
	done chan struct{}
	err  error
}

// wait waits for Run to return and fails t on an error.
func (r *running) wait(t *testing.T, what string) {
	t.Helper()
	select {
	case <-r.done:
		if r.err != nil {
			t.Fatalf("Run: %v", r.err)
		}
	case <-time.After(wait):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// runUntil runs a proxy whose context the test cancels.
func runUntil(t *testing.T, cfg Config, deps Deps) (*Inbound, context.CancelFunc, *running) {
	t.Helper()
	in := listening(t, cfg, deps)
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{done: make(chan struct{})}
	go func() { defer close(r.done); r.err = in.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-r.done:
		case <-time.After(wait):
			t.Error("Run did not return")
		}
	})
	return in, cancel, r
}

// TestShutdownDrains: when Run's context ends the proxy accepts nothing new, lets the
// request and the TCP connection in flight finish, and returns once they have.
func TestShutdownDrains(t *testing.T) {
	pki := testutil.NewPKI(t)
	httpPort, entered, release := slowApp(t)
	echoPort := echoApp(t)
	in, cancel, done := runUntil(t, Config{DefaultPort: httpPort, Identity: serverID, Grace: wait}, Deps{TLS: proxytest.TLS(t, pki, serverID)})
	addr := in.Addr().String()
	hc := client{proxy: addr}.httpClient(t, 0)
	slow := proxytest.GetAsync(hc, "http://web/slow")
	testutil.Recv(t, entered, wait, "the slow request at the app")
	conn, err := client{proxy: addr, tls: proxytest.TLS(t, pki, gatewayID)}.dial(context.Background(), "", &transportheader.Header{Port: echoPort})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	line := func(s string) {
		t.Helper()
		_ = conn.SetDeadline(time.Now().Add(wait))
		if _, err := io.WriteString(conn, s); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, len(s))
		if _, err := io.ReadFull(conn, buf); err != nil || string(buf) != s {
			t.Fatalf("echo %q: %q %v", s, buf, err)
		}
	}
	line("before\n")

	cancel()
	testutil.Eventually(t, wait, "the listener closed", func() bool {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
		}
		return err != nil
	})
	testutil.Never(t, 100*time.Millisecond, "Run returning with work in flight", func() bool {
		select {
		case <-done.done:
			return true
		default:
			return false
		}
	})
	line("during\n")
	close(release)
	if r := testutil.Recv(t, slow, wait, "the slow response"); r.Err != nil || r.Status != http.StatusOK || r.Body != "done" {
		t.Fatalf("in-flight request: %+v", r)
	}
	got, err := echo(t, conn, "last\n")
	if err != nil || got != "last\nbye\n" {
		t.Fatalf("in-flight TCP connection: %q %v", got, err)
	}
	done.wait(t, "Run to return")
}

// TestShutdownGrace: what is still open when the grace period ends is closed.
func TestShutdownGrace(t *testing.T) {
	pki := testutil.NewPKI(t)
	httpPort, entered, _ := slowApp(t)
	echoPort := echoApp(t)
	in, cancel, done := runUntil(t, Config{DefaultPort: httpPort, Identity: serverID, Grace: 100 * time.Millisecond}, Deps{TLS: proxytest.TLS(t, pki, serverID)})
	addr := in.Addr().String()
	slow := proxytest.GetAsync(client{proxy: addr}.httpClient(t, 0), "http://web/slow")
	testutil.Recv(t, entered, wait, "the slow request at the app")
	conn, err := client{proxy: addr, tls: proxytest.TLS(t, pki, gatewayID)}.dial(context.Background(), "", &transportheader.Header{Port: echoPort})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	cancel()
	done.wait(t, "Run to return after the grace period")
	if r := testutil.Recv(t, slow, wait, "the slow request to fail"); r.Err == nil && r.Status == http.StatusOK {
		t.Fatalf("a request outlived the grace period: %+v", r)
	}
	_ = conn.SetReadDeadline(time.Now().Add(wait))
	if n, err := conn.Read(make([]byte, 1)); err == nil {
		t.Fatalf("the TCP connection is still open after the grace period (read %d)", n)
	}
}
