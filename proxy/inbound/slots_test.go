package inbound

import (
	"context"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meridian-mesh/meridian/internal/testutil"
	"github.com/meridian-mesh/meridian/proxy/internal/proxytest"
)

// awaitClosed waits (up to wait) for the proxy to close c, after anything it still sends; it
// fails t if c is still open.
func awaitClosed(t *testing.T, c net.Conn, what string) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(wait))
	buf := make([]byte, 512)
	for {
		_, err := c.Read(buf)
		if err == nil {
			continue
		}
		if !closedByPeer(err) {
			t.Errorf("%s: the connection is still open (%v)", what, err)
		}
		return
	}
}

// TestIdleKeepAliveClosed: an HTTP/1 connection that waits for its next request longer than
// IdleTimeout is closed, on the lean path and on the net/http path, so that idle clients do
// not hold MaxConns' slots; one that sent an empty line after its last request is idle too.
func TestIdleKeepAliveClosed(t *testing.T) {
	port := httpApp(t)
	p := startProxy(t, Config{DefaultPort: port, IdleTimeout: 200 * time.Millisecond, DetectTimeout: time.Minute}, Deps{})
	for name, raw := range map[string]string{
		"lean": "GET / HTTP/1.1\r\nHost: x\r\n\r\n",
		// An empty line after a body (clients send one) is not the start of a request: the
		// connection is idle, not reading a head for DetectTimeout.
		"lean, an empty line after the body": "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello\r\n",
		"net/http":                           "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\nhello",
	} {
		c := proxytest.Dial(t, p.addr)
		res := proxytest.Exchange(t, c, raw, 1, http.MethodGet)
		if res[0].StatusCode != http.StatusOK || res[0].Close {
			t.Fatalf("%s: %d, close %v", name, res[0].StatusCode, res[0].Close)
		}
		awaitClosed(t, c, name+": idle past IdleTimeout")
	}
}

// TestDeniedClientDisconnected: an HTTP/1 client refused with 403 is disconnected after the
// answer (Connection: close, on the lean and the net/http path): a denied client cannot keep
// connection slots open with requests. An HTTP/2 connection stays: a client proxy
// multiplexes the requests of many routes on it, and policy decides by route.
func TestDeniedClientDisconnected(t *testing.T) {
	port := httpApp(t)
	p := startProxy(t, Config{DefaultPort: port, DefaultPolicy: "deny"}, Deps{})
	from := client{proxy: p.addr, from: clientAddr}
	for name, raw := range map[string]string{
		"lean":     "GET / HTTP/1.1\r\nHost: x\r\n\r\n",
		"net/http": "POST /%61 HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello", // an escaped path: handed over
	} {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		c, err := from.dial(ctx, "", nil)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		res := proxytest.Exchange(t, c, raw, 1, http.MethodGet)
		if res[0].StatusCode != http.StatusForbidden || !res[0].Close {
			t.Errorf("%s: %d, close %v, want 403 closing the connection", name, res[0].StatusCode, res[0].Close)
		}
		awaitClosed(t, c, name+": after a 403")
	}

	var dials atomic.Int32
	var pr http.Protocols
	pr.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: &pr, DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		dials.Add(1)
		return from.dial(ctx, "", nil)
	}}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: wait}
	for i := range 2 {
		if res, _ := get(t, hc, "/", nil); res.StatusCode != http.StatusForbidden || res.ProtoMajor != 2 {
			t.Fatalf("HTTP/2 request %d: %d %s, want 403 over HTTP/2", i, res.StatusCode, res.Proto)
		}
	}
	if n := dials.Load(); n != 1 {
		t.Errorf("HTTP/2: %d connections for two denied requests, want 1 (the connection stays)", n)
	}
}

// closeNotifier reports its first Close on closed (buffered).
type closeNotifier struct {
	net.Conn
	closed chan struct{}
	once   sync.Once
}

func (c *closeNotifier) Close() error {
	c.once.Do(func() { c.closed <- struct{}{} })
	return c.Conn.Close()
}

// TestIdleHTTP2Closed: an HTTP/2 connection without a stream for IdleTimeout is told to go
// away, and the client's next request opens a new one.
func TestIdleHTTP2Closed(t *testing.T) {
	lis := testutil.Listen(t)
	var h2c http.Protocols
	h2c.SetUnencryptedHTTP2(true)
	proxytest.Serve(t, &http.Server{Protocols: &h2c, Handler: http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})}, lis)
	port := uint16(lis.Addr().(*net.TCPAddr).Port)
	p := startProxy(t, Config{DefaultPort: port, IdleTimeout: 200 * time.Millisecond}, Deps{})
	var dials atomic.Int32
	closed := make(chan struct{}, 1)
	var pr http.Protocols
	pr.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: &pr, DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		c, err := client{proxy: p.addr}.dial(ctx, "", nil)
		if err != nil {
			return nil, err
		}
		if dials.Add(1) == 1 {
			return &closeNotifier{Conn: c, closed: closed}, nil
		}
		return c, nil
	}}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: wait}
	if res, _ := get(t, hc, "/", nil); res.StatusCode != http.StatusOK || res.ProtoMajor != 2 {
		t.Fatalf("%d %s", res.StatusCode, res.Proto)
	}
	testutil.Recv(t, closed, wait, "the idle HTTP/2 connection to close")
	if res, _ := get(t, hc, "/", nil); res.StatusCode != http.StatusOK {
		t.Fatalf("after the close: %d", res.StatusCode)
	}
	if n := dials.Load(); n != 2 {
		t.Errorf("%d connections, want 2", n)
	}
}
