package inbound

import (
	"bufio"
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/netip"
	"testing"
	"time"

	"github.com/meridian-mesh/meridian/internal/testutil"
	"github.com/meridian-mesh/meridian/proxy/internal/proxytest"
	"github.com/meridian-mesh/meridian/proxy/transportheader"
	"go.uber.org/zap"
)

// clientHello captures the first TLS record a Go client sends for serverName.
func clientHello(t testing.TB, serverName string) []byte {
	t.Helper()
	a, b := net.Pipe()
	defer b.Close()
	go func() {
		defer a.Close()
		_ = tls.Client(a, &tls.Config{ServerName: serverName, InsecureSkipVerify: true, NextProtos: []string{"h2"}}).Handshake()
	}()
	_ = b.SetDeadline(time.Now().Add(wait))
	hdr := make([]byte, recordHeaderLen)
	if _, err := io.ReadFull(b, hdr); err != nil {
		t.Fatal(err)
	}
	n, ok := recordLen(hdr)
	if !ok {
		t.Fatalf("record header %x", hdr)
	}
	rec := make([]byte, n)
	copy(rec, hdr)
	if _, err := io.ReadFull(b, rec[recordHeaderLen:]); err != nil {
		t.Fatal(err)
	}
	return rec
}

func TestServerName(t *testing.T) {
	hello := clientHello(t, serverID)
	if name, ok := serverName(hello); !ok || name != serverID {
		t.Fatalf("serverName = %q %v", name, ok)
	}
	if name, ok := serverName(clientHello(t, "")); !ok || name != "" {
		t.Errorf("without SNI: %q %v", name, ok)
	}
	for _, n := range []int{0, 4, 5, 40, len(hello) - 1} {
		if _, ok := serverName(hello[:n]); ok {
			t.Errorf("a hello cut at %d bytes parsed", n)
		}
	}
	if _, ok := serverName([]byte("GET / HTTP/1.1\r\n\r\n")); ok {
		t.Error("HTTP parsed as a ClientHello")
	}
}

func FuzzServerName(f *testing.F) {
	f.Add(clientHello(f, serverID))
	f.Add(clientHello(f, ""))
	f.Add([]byte("\x16\x03\x01\x00\x05\x01\x00\x00\x01\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if name, ok := serverName(b); ok && len(name) > len(b) {
			t.Fatalf("name %q longer than the input", name)
		}
	})
}

// FuzzPreamble: the preamble (TLS sniff, handshake, transport header) ends on any bytes, with
// a session or an error, and never panics.
func FuzzPreamble(f *testing.F) {
	pki := testutil.NewPKI(f)
	in, err := New(Config{Identity: serverID, DefaultPort: 80, DetectTimeout: 2 * time.Second}, Deps{TLS: proxytest.TLS(f, pki, serverID), Logger: zap.NewNop()})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(clientHello(f, serverID))
	f.Add(clientHello(f, "other.example.com"))
	f.Add([]byte(transportheader.Preface))
	f.Add(transportheader.Encode(transportheader.Header{Port: 8080, Protocol: transportheader.HTTP2}))
	f.Add([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
	f.Add([]byte("\x16\x03\x01\xff\xff"))
	f.Add([]byte("\x16"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		a, b := net.Pipe()
		wrote := make(chan struct{})
		go func() {
			defer close(wrote)
			_, _ = a.Write(data)
			_ = a.Close()
		}()
		s, err := in.preamble(context.Background(), b, netip.AddrPort{})
		_ = b.Close()
		<-wrote
		if err == nil && (s == nil || s.conn == nil || s.port == 0) {
			t.Fatalf("preamble succeeded with an incomplete session: %+v", s)
		}
	})
}

// TestTLSPassthrough: TLS for a server name other than the proxy's, or for none, is the
// application's: the proxy forwards it untouched, and the client completes its handshake
// with the app.
func TestTLSPassthrough(t *testing.T) {
	pki := testutil.NewPKI(t)
	const appName = "app.example.com"
	lis := tls.NewListener(newLoopback(t), &tls.Config{Certificates: []tls.Certificate{*pki.Leaf(t, appName)}})
	proxytest.Serve(t, &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "app tls")
	})}, lis)
	port := uint16(lis.Addr().(*net.TCPAddr).Port)
	p := startProxy(t, Config{Identity: serverID, DefaultPort: port}, Deps{TLS: proxytest.TLS(t, pki, serverID)})
	tr := &http.Transport{
		TLSClientConfig: &tls.Config{ServerName: appName, RootCAs: pki.Roots},
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "tcp", p.addr)
		},
	}
	defer tr.CloseIdleConnections()
	req, _ := http.NewRequest(http.MethodGet, "https://"+appName+"/", nil)
	res, err := (&http.Client{Transport: tr, Timeout: wait}).Do(req)
	if err != nil {
		t.Fatalf("TLS through the proxy to the app: %v", err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if string(b) != "app tls" {
		t.Fatalf("body %q", b)
	}
	if got := p.counter(t, "tcp_open_total", map[string]string{"tls": "no_identity"}); got < 1 {
		t.Errorf("passthrough not proxied as TCP: tcp_open_total %v", got)
	}
	// A client that dials by IP sends no server name: it is the application's client too,
	// and gets the application's certificate, not the proxy's.
	raw, err := net.DialTimeout("tcp", p.addr, wait)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	_ = raw.SetDeadline(time.Now().Add(wait))
	c := tls.Client(raw, &tls.Config{InsecureSkipVerify: true})
	if err := c.Handshake(); err != nil {
		t.Fatalf("TLS without a server name through the proxy: %v", err)
	}
	if got := c.ConnectionState().PeerCertificates[0].DNSNames; len(got) != 1 || got[0] != appName {
		t.Errorf("without a server name the client got the certificate of %v, not the application's", got)
	}
}

func newLoopback(t testing.TB) net.Listener {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lis.Close() })
	return lis
}

// TestServerFirstOnOpaquePort: on a redirected connection to a port that is opaque, by
// configuration or by its Server's policy, nothing is read before the application is
// dialled, as linkerd2-proxy skips detection there: an application that speaks first (MySQL,
// SMTP) greets a client that waits for it. A detected port still waits for the client.
func TestServerFirstOnOpaquePort(t *testing.T) {
	lis := newLoopback(t)
	testutil.ServeConns(t, lis, "the server-first application", func(c net.Conn) {
		_, _ = io.WriteString(c, "220 hello\r\n")
		_, _ = io.Copy(io.Discard, c)
	})
	app := lis.Addr().(*net.TCPAddr).AddrPort()
	redirected := func(net.Conn) (netip.AddrPort, error) { return app, nil }
	for _, c := range []struct {
		name   string
		cfg    Config
		greets bool
	}{
		{"opaque by configuration", Config{OpaquePorts: []uint16{app.Port()}, DetectTimeout: 5 * time.Second}, true},
		{"detected", Config{DetectTimeout: 300 * time.Millisecond}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := startProxy(t, c.cfg, Deps{OriginalDst: redirected})
			conn := proxytest.Dial(t, p.addr)
			_ = conn.SetReadDeadline(time.Now().Add(2 * time.Second))
			line, err := bufio.NewReader(conn).ReadString('\n')
			if greeted := err == nil && line == "220 hello\r\n"; greeted != c.greets {
				t.Errorf("the client read %q (%v); want the greeting %v", line, err, c.greets)
			}
		})
	}
}

// TestRedirectedPortHeldOnce: a redirected connection holds its port's policy once while it
// lasts, whichever way it goes (opaque without reading, through detection to HTTP, or refused
// in its preamble), and lets it go when it ends.
func TestRedirectedPortHeldOnce(t *testing.T) {
	app := httpApp(t)
	appAddr := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), app)
	for name, cfg := range map[string]Config{
		"detected": {DetectTimeout: 5 * time.Second},
		"opaque":   {OpaquePorts: []uint16{app}, DetectTimeout: 5 * time.Second},
	} {
		t.Run(name, func(t *testing.T) {
			p := startProxy(t, cfg, Deps{OriginalDst: func(net.Conn) (netip.AddrPort, error) { return appAddr, nil }})
			c := proxytest.Dial(t, p.addr)
			if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: web\r\n\r\n"); err != nil {
				t.Fatal(err)
			}
			_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, err := http.ReadResponse(bufio.NewReader(c), nil); err != nil {
				t.Fatal(err)
			}
			if n := p.watcher.Held(app); n != 1 {
				t.Errorf("an open connection holds its port %d times, want once", n)
			}
			_ = c.Close()
			refused := proxytest.Dial(t, p.addr) // closed before its preamble ends
			_ = refused.Close()
			testutil.Eventually(t, 5*time.Second, "the port to be let go", func() bool { return p.watcher.Held(app) == 0 })
		})
	}
}
