package inbound

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/meridian-mesh/meridian/internal/testutil"
	"github.com/meridian-mesh/meridian/proxy/internal/proxytest"
	"github.com/meridian-mesh/meridian/proxy/transportheader"
)

// echoAppAt is echoApp listening on host.
func echoAppAt(t *testing.T, host string) uint16 {
	t.Helper()
	lis, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lis.Close() })
	return serveEcho(t, lis)
}

// TestDirectConnections: a connection with a transport header names its own target port, so
// it is taken only from a client with an identity, and goes to that port at the address the
// client connected to (the pod's), as linkerd2-proxy does. The proxy listens on 127.0.0.2,
// standing for the pod's address; an application on 127.0.0.1 only stands for what a pod
// serves on loopback only (a debug port, its proxy's outbound listener). Both used to be
// reached: the target was 127.0.0.1, and a client without a certificate was served.
func TestDirectConnections(t *testing.T) {
	pki := testutil.NewPKI(t)
	loopbackOnly := echoApp(t)
	if c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.2", strconv.Itoa(int(loopbackOnly))), time.Second); err == nil {
		_ = c.Close()
		t.Skipf("port %d is open on 127.0.0.2 too; the loopback-only application is not", loopbackOnly)
	}
	podApp := echoAppAt(t, "127.0.0.2")
	p := startProxy(t, Config{Identity: serverID, ListenAddr: "127.0.0.2:0"}, Deps{TLS: proxytest.TLS(t, pki, serverID)})
	meshed := client{proxy: p.addr, tls: proxytest.TLS(t, pki, gatewayID), from: "127.0.0.3"}
	// The refusal of a client without identity, apart from where the target is: a proxy
	// that sends every port to the pod's address.
	pa := startProxy(t, Config{Identity: serverID, ListenAddr: "127.0.0.2:0",
		AppAddr: func(port uint16) string { return net.JoinHostPort("127.0.0.2", strconv.Itoa(int(port))) }},
		Deps{TLS: proxytest.TLS(t, pki, serverID)})
	anonymous := client{proxy: pa.addr, tls: proxytest.TLS(t, pki, ""), from: "127.0.0.3"}
	meshedToPA := client{proxy: pa.addr, tls: proxytest.TLS(t, pki, gatewayID), from: "127.0.0.3"}
	for _, c := range []struct {
		name string
		c    client
		port uint16
		want string
	}{
		{"meshed client to the pod's port", meshed, podApp, "hello\nbye\n"},
		{"meshed client to a loopback-only port", meshed, loopbackOnly, ""},
		{"client without identity", anonymous, podApp, ""},
		{"meshed client, the same proxy", meshedToPA, podApp, "hello\nbye\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), wait)
			defer cancel()
			conn, err := c.c.dial(ctx, "", &transportheader.Header{Port: c.port})
			if err != nil {
				if c.want == "" {
					return // refused in the handshake or the header: as good as closed
				}
				t.Fatal(err)
			}
			got, _ := echo(t, conn, "hello\n")
			if got != c.want {
				t.Fatalf("echo %q, want %q", got, c.want)
			}
		})
	}
}

// TestH2CUpgradeIsStripped: an HTTP/1.1 request asking to upgrade to h2c is forwarded as a
// plain request, without its upgrade headers, as linkerd2-proxy does. Forwarded as an
// upgrade, it let a client allowed on one route (the probe route) switch the connection to
// HTTP/2 and send requests that no route authorized, with an l5d-client-id of its choosing,
// to an application that accepts h2c upgrades.
func TestH2CUpgradeIsStripped(t *testing.T) {
	pki := testutil.NewPKI(t)
	lis := testutil.Listen(t)
	proxytest.Serve(t, &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != "" || r.Header.Get("Http2-Settings") != "" {
			w.Header().Set("Connection", "Upgrade")
			w.Header().Set("Upgrade", "h2c")
			w.WriteHeader(http.StatusSwitchingProtocols) // as an application that accepts h2c would
			return
		}
		_, _ = io.WriteString(w, "path="+r.URL.Path)
	})}, lis)
	httpPort := uint16(lis.Addr().(*net.TCPAddr).Port)
	p := policyProxy(t, pki, startController(t, meshYAML(httpPort, 1, 2)).Addr, "all-unauthenticated", httpPort)
	c, err := client{proxy: p.addr, from: clientAddr}.dialer().Dial("tcp", p.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(wait))
	// The probe route is open to everyone (Linkerd's default probe authorization).
	h2cUpgrade(t, c, "/ready")
}

// h2cUpgrade sends a GET of path asking to upgrade to h2c on c, and fails unless it is answered
// as the plain request (200, "path=<path>"); it returns c's reader.
func h2cUpgrade(t *testing.T, c net.Conn, path string) *bufio.Reader {
	t.Helper()
	if _, err := io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: web\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK || string(body) != "path="+path {
		t.Fatalf("h2c upgrade request answered %d %q, want the plain request's 200", res.StatusCode, body)
	}
	return br
}

// TestHandedOffSlowHeadIsClosed: a connection that net/http's server took over (a request the
// lean path does not take) and that then sends a request head slowly is closed after
// DetectTimeout, as on the lean path, rather than held open for as long as the client likes.
func TestHandedOffSlowHeadIsClosed(t *testing.T) {
	lis := testutil.Listen(t)
	proxytest.Serve(t, &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "path="+r.URL.Path)
	})}, lis)
	httpPort := uint16(lis.Addr().(*net.TCPAddr).Port)
	p := startProxy(t, Config{DefaultPolicy: "all-unauthenticated", DefaultPort: httpPort, DetectTimeout: 300 * time.Millisecond}, Deps{})
	c, err := client{proxy: p.addr, from: clientAddr}.dialer().Dial("tcp", p.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(wait))
	// An h2c upgrade request is not lean: net/http's server answers it, and keeps the
	// connection.
	br := h2cUpgrade(t, c, "/a")
	if _, err := io.WriteString(c, "GET /b HTTP/1.1\r\nHost: web\r\n"); err != nil { // and no more
		t.Fatal(err)
	}
	if n, err := br.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read %d bytes, %v: the connection was not closed while the head stayed unfinished", n, err)
	}
}
