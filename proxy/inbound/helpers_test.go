package inbound

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/meridian-mesh/meridian/internal/testutil"
	"github.com/meridian-mesh/meridian/internal/tlsid"
	"github.com/meridian-mesh/meridian/proxy/internal/proxytest"
	"github.com/meridian-mesh/meridian/proxy/metrics"
	"github.com/meridian-mesh/meridian/proxy/transportheader"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

func TestMain(m *testing.M) { os.Exit(testutil.Main(m, nil)) }

// wait bounds every wait in these tests.
const wait = 20 * time.Second

const (
	serverID  = "web.shop.serviceaccount.identity.linkerd.cluster.local"
	gatewayID = "api-gateway.shop.serviceaccount.identity.linkerd.cluster.local"
	otherID   = "other.shop.serviceaccount.identity.linkerd.cluster.local"
)

// proxy is a running inbound proxy.
type proxy struct {
	*Inbound
	addr string
	reg  *prometheus.Registry
}

// startProxy runs an inbound proxy on 127.0.0.1 until the test ends.
func startProxy(t testing.TB, cfg Config, deps Deps) *proxy {
	t.Helper()
	reg := prometheus.NewRegistry()
	if deps.Metrics == nil {
		deps.Metrics = metrics.New(reg)
	}
	in := listening(t, cfg, deps)
	testutil.Go(t, "Inbound.Run", in.Run)
	return &proxy{Inbound: in, addr: in.Addr().String(), reg: reg}
}

// listening returns an inbound proxy that listens (on 127.0.0.1 unless cfg names another
// address) and logs to the test unless deps has a logger; the caller runs it.
func listening(t testing.TB, cfg Config, deps Deps) *Inbound {
	t.Helper()
	if cfg.ListenAddr == "" || cfg.ListenAddr == DefaultListenAddr {
		cfg.ListenAddr = "127.0.0.1:0"
	}
	if deps.Logger == nil {
		deps.Logger = zaptest.NewLogger(t)
	}
	in, err := New(cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	if err := in.Listen(); err != nil {
		t.Fatal(err)
	}
	return in
}

// counter sums the samples of family name whose labels include want.
func (p *proxy) counter(t testing.TB, name string, want map[string]string) float64 {
	t.Helper()
	return proxytest.Gathered(t, p.reg, name, want)
}

// httpApp is an HTTP/1.1 application that answers with what it saw: the l5d-client-id
// header (in X-Seen-Client-Id) and the request path (in the body).
func httpApp(t testing.TB) (port uint16) {
	t.Helper()
	lis := testutil.Listen(t)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Seen-Client-Id", strings.Join(r.Header.Values("L5d-Client-Id"), ","))
		w.Header().Set("X-Seen-Proto", r.Proto)
		n, _ := io.Copy(io.Discard, r.Body)
		w.Header().Set("X-Seen-Body-Len", strconv.FormatInt(n, 10))
		_, _ = io.WriteString(w, "path="+r.URL.Path)
	})}
	proxytest.Serve(t, srv, lis)
	return uint16(lis.Addr().(*net.TCPAddr).Port)
}

// grpcApp is a gRPC (h2c) application with the health service.
func grpcApp(t testing.TB) uint16 {
	t.Helper()
	addr := testutil.ServeGRPC(t, func(s *grpc.Server) { healthpb.RegisterHealthServer(s, health.NewServer()) })
	_, p, _ := net.SplitHostPort(addr)
	n, _ := strconv.Atoi(p)
	return uint16(n)
}

// echoApp is a TCP application on 127.0.0.1 that echoes each line and, at the client's end
// of stream, writes "bye\n" and closes.
func echoApp(t testing.TB) uint16 {
	t.Helper()
	return serveEcho(t, testutil.Listen(t))
}

// serveEcho serves echoApp's application on lis and returns its port.
func serveEcho(t testing.TB, lis net.Listener) uint16 {
	t.Helper()
	testutil.ServeConns(t, lis, "the echo application", func(c net.Conn) {
		r := bufio.NewReader(c)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				_, _ = io.WriteString(c, "bye\n")
				return
			}
			_, _ = io.WriteString(c, line)
		}
	})
	return uint16(lis.Addr().(*net.TCPAddr).Port)
}

// client dials the proxy the ways a client proxy or an unmeshed client would.
type client struct {
	proxy string
	tls   *tlsid.Config // nil: plaintext
	from  string        // the local address to dial from ("" for any)
}

func (c client) dialer() *net.Dialer {
	d := &net.Dialer{Timeout: wait}
	if c.from != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(c.from)}
	}
	return d
}

// dial connects: plaintext, TLS with the given ALPN, or TLS with the transport header
// when h is set.
func (c client) dial(ctx context.Context, alpn string, h *transportheader.Header) (net.Conn, error) {
	raw, err := c.dialer().DialContext(ctx, "tcp", c.proxy)
	if err != nil {
		return nil, err
	}
	if c.tls == nil {
		return raw, nil
	}
	if h != nil {
		alpn = transportheader.ALPN
	}
	tc := tls.Client(raw, c.tls.Client(serverID, alpn))
	if err := tc.HandshakeContext(ctx); err != nil {
		raw.Close()
		return nil, fmt.Errorf("handshake: %w", err)
	}
	if h != nil {
		if _, err := tc.Write(transportheader.Encode(*h)); err != nil {
			tc.Close()
			return nil, err
		}
	}
	return tc, nil
}

// httpClient sends HTTP/1.1 through the proxy: with the header for port when port != 0.
func (c client) httpClient(t testing.TB, port uint16) *http.Client {
	t.Helper()
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		if port != 0 {
			return c.dial(ctx, "", &transportheader.Header{Port: port, Protocol: transportheader.HTTP1})
		}
		return c.dial(ctx, "http/1.1", nil)
	}, DisableCompression: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: wait}
}

// grpcConn is a gRPC connection through the proxy with the transport header (HTTP2).
func (c client) grpcConn(t testing.TB, port uint16) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient("passthrough:///app", grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			return c.dial(ctx, "", &transportheader.Header{Port: port, Protocol: transportheader.HTTP2})
		}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// get sends GET path with extra headers and returns the response (body read).
func get(t testing.TB, hc *http.Client, path string, hdr map[string]string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://web.shop.svc.cluster.local"+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := hc.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res, string(b)
}

// closedByPeer reports whether err means the other side closed the connection: a
// clean end, a reset, or a write that found it already closed.
func closedByPeer(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// echo writes line on an opaque connection, half-closes it and returns all it read back.
func echo(t testing.TB, conn net.Conn, line string) (string, error) {
	t.Helper()
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(wait))
	if _, err := io.WriteString(conn, line); err != nil {
		return "", err
	}
	if cw, ok := conn.(interface{ CloseWrite() error }); ok {
		if err := cw.CloseWrite(); err != nil {
			return "", err
		}
	}
	b, err := io.ReadAll(conn)
	return string(b), err
}
