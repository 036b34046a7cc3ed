package inbound

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/meridian-mesh/meridian/internal/testutil"
	"github.com/meridian-mesh/meridian/proxy/internal/proxytest"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// TestDetectedHTTP2: plaintext HTTP/2 with prior knowledge (a gRPC client) is detected and
// forwarded over h2c; a Linkerd client proxy's upgraded HTTP/1 request (l5d-orig-proto)
// reaches an HTTP/1.1 application as HTTP/1.1, and its response says so.
func TestDetectedHTTP2(t *testing.T) {
	grpcPort, httpPort := grpcApp(t), httpApp(t)
	g := startProxy(t, Config{DefaultPort: grpcPort}, Deps{})
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	conn := testutil.DialGRPC(t, g.addr)
	if hr, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil || hr.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("gRPC through detection: %v %v", hr, err)
	}

	h := startProxy(t, Config{DefaultPort: httpPort}, Deps{})
	p := new(http.Protocols)
	p.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: p, DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "tcp", h.addr)
	}}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: wait}
	res, body := get(t, hc, "/up", map[string]string{"L5d-Orig-Proto": "HTTP/1.1"})
	if res.StatusCode != http.StatusOK || res.ProtoMajor != 2 || res.Header.Get("X-Seen-Proto") != "HTTP/1.1" ||
		res.Header.Get("L5d-Orig-Proto") != "HTTP/1.1" || body != "path=/up" {
		t.Fatalf("orig-proto request: %d %s %v %q", res.StatusCode, res.Proto, res.Header, body)
	}
}

// TestUpgrade: an HTTP/1.1 upgrade is forwarded, the connection then carries raw bytes both
// ways, and the client's l5d-client-id is stripped on it too.
func TestUpgrade(t *testing.T) {
	lis := testutil.Listen(t)
	proxytest.Serve(t, &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != "echo" || r.Header.Get("L5d-Client-Id") != "" {
			http.Error(w, "bad upgrade request", http.StatusBadRequest)
			return
		}
		c, rw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = rw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
		_ = rw.Flush()
		_ = c.SetDeadline(time.Now().Add(wait))
		line, _ := rw.ReadString('\n')
		_, _ = rw.WriteString("echo " + line)
		_ = rw.Flush()
	})}, lis)
	p := startProxy(t, Config{DefaultPort: uint16(lis.Addr().(*net.TCPAddr).Port)}, Deps{})
	c, err := net.DialTimeout("tcp", p.addr, wait)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(wait))
	_, _ = io.WriteString(c, "GET /ws HTTP/1.1\r\nHost: web\r\nConnection: Upgrade\r\nUpgrade: echo\r\nL5d-Client-Id: spoofed\r\n\r\n")
	br := bufio.NewReader(c)
	res, err := http.ReadResponse(br, nil)
	if err != nil || res.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade response: %v %v", res, err)
	}
	_, _ = io.WriteString(c, "hi\n")
	line, err := br.ReadString('\n')
	if err != nil || line != "echo hi\n" {
		t.Fatalf("after the upgrade: %q %v", line, err)
	}
}

// TestAppDown: a request for an application that does not listen is answered 502 by the
// proxy, with l5d-proxy-error, and counted as failed.
func TestAppDown(t *testing.T) {
	lis := testutil.Listen(t)
	port := uint16(lis.Addr().(*net.TCPAddr).Port)
	lis.Close()
	p := startProxy(t, Config{DefaultPort: port}, Deps{})
	res, _ := get(t, client{proxy: p.addr}.httpClient(t, 0), "/", nil)
	if res.StatusCode != http.StatusBadGateway || !strings.Contains(res.Header.Get("L5d-Proxy-Error"), "application") {
		t.Fatalf("app down: %d %v", res.StatusCode, res.Header)
	}
	if got := p.counter(t, "response_total", map[string]string{"status_code": "502", "classification": "failure"}); got != 1 {
		t.Errorf("failed response counted %v times", got)
	}
}
