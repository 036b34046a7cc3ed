package inbound

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/meridian-mesh/meridian/internal/testutil"
	"github.com/meridian-mesh/meridian/proxy/internal/proxytest"
	"github.com/meridian-mesh/meridian/proxy/transportheader"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// TestClientIdentity: the application sees the identity an mTLS client proved in
// l5d-client-id, whatever the client sent in that header; a plaintext client or a TLS
// client without a certificate proves none.
func TestClientIdentity(t *testing.T) {
	pki := testutil.NewPKI(t)
	app := httpApp(t)
	p := startProxy(t, Config{DefaultPort: app, Identity: serverID}, Deps{TLS: proxytest.TLS(t, pki, serverID)})
	spoof := map[string]string{"L5d-Client-Id": "spoofed.identity"}

	mtls := client{proxy: p.addr, tls: proxytest.TLS(t, pki, gatewayID)}.httpClient(t, 0)
	for _, hdr := range []map[string]string{nil, spoof} {
		res, body := get(t, mtls, "/hello", hdr)
		if res.StatusCode != http.StatusOK || body != "path=/hello" || res.Header.Get("X-Seen-Client-Id") != gatewayID {
			t.Fatalf("mTLS (sent %v): %d %q, app saw client id %q", hdr, res.StatusCode, body, res.Header.Get("X-Seen-Client-Id"))
		}
	}
	for name, c := range map[string]client{
		"plaintext":          {proxy: p.addr},
		"TLS without a cert": {proxy: p.addr, tls: proxytest.TLS(t, pki, "")},
	} {
		res, _ := get(t, c.httpClient(t, 0), "/", spoof)
		if res.StatusCode != http.StatusOK || res.Header.Get("X-Seen-Client-Id") != "" {
			t.Errorf("%s: %d, app saw client id %q", name, res.StatusCode, res.Header.Get("X-Seen-Client-Id"))
		}
	}
	if got := p.counter(t, "response_total", map[string]string{"direction": "inbound", "tls": "true",
		"client_id": gatewayID, "status_code": "200", "srv_name": "all-unauthenticated"}); got != 2 {
		t.Errorf("response_total for the mTLS client = %v, want 2", got)
	}
	if got := p.counter(t, "inbound_http_authz_allow_total", map[string]string{"authz_name": "all-unauthenticated"}); got != 4 {
		t.Errorf("inbound_http_authz_allow_total = %v, want 4", got)
	}
}

// TestTransportHeader: with the opaque transport, the header names the port and the
// session protocol: HTTP/1, HTTP/2 (a gRPC call) and opaque TCP all reach their
// application, which no default port would have found.
func TestTransportHeader(t *testing.T) {
	pki := testutil.NewPKI(t)
	httpPort, grpcPort, echoPort := httpApp(t), grpcApp(t), echoApp(t)
	p := startProxy(t, Config{Identity: serverID}, Deps{TLS: proxytest.TLS(t, pki, serverID)})
	c := client{proxy: p.addr, tls: proxytest.TLS(t, pki, gatewayID)}

	res, body := get(t, c.httpClient(t, httpPort), "/h1", map[string]string{"L5d-Client-Id": "x"})
	if res.StatusCode != http.StatusOK || body != "path=/h1" || res.Header.Get("X-Seen-Client-Id") != gatewayID ||
		res.Header.Get("X-Seen-Proto") != "HTTP/1.1" {
		t.Fatalf("HTTP/1 via the header: %d %q %v", res.StatusCode, body, res.Header)
	}

	post, err := c.httpClient(t, httpPort).Post("http://web/upload", "text/plain", strings.NewReader(strings.Repeat("x", 100000)))
	if err != nil {
		t.Fatal(err)
	}
	post.Body.Close()
	if post.StatusCode != http.StatusOK || post.Header.Get("X-Seen-Body-Len") != "100000" {
		t.Fatalf("POST via the header: %d, app read %s bytes", post.StatusCode, post.Header.Get("X-Seen-Body-Len"))
	}

	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	hr, err := healthpb.NewHealthClient(c.grpcConn(t, grpcPort)).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil || hr.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("gRPC via the header: %v %v", hr, err)
	}

	conn, err := c.dial(ctx, "", &transportheader.Header{Port: echoPort})
	if err != nil {
		t.Fatal(err)
	}
	got, err := echo(t, conn, "hello\nworld\n")
	if err != nil || got != "hello\nworld\nbye\n" {
		t.Fatalf("opaque via the header: %q %v", got, err)
	}
	labels := map[string]string{"direction": "inbound", "client_id": gatewayID, "tls": "true"}
	if p.counter(t, "tcp_open_total", labels) != 1 || p.counter(t, "tcp_read_bytes_total", labels) != 12 ||
		p.counter(t, "tcp_write_bytes_total", labels) != 16 || p.counter(t, "inbound_tcp_authz_allow_total", nil) != 1 {
		t.Errorf("tcp metrics: open %v read %v written %v allowed %v", p.counter(t, "tcp_open_total", labels),
			p.counter(t, "tcp_read_bytes_total", labels), p.counter(t, "tcp_write_bytes_total", labels),
			p.counter(t, "inbound_tcp_authz_allow_total", nil))
	}
	if p.counter(t, "response_total", map[string]string{"grpc_status": "0", "classification": "success"}) != 1 {
		t.Error("the gRPC response was not counted with grpc_status 0")
	}
}

// TestPlaintextOpaquePort: a port in OpaquePorts is proxied as TCP without detection, even
// when its bytes look like HTTP.
func TestPlaintextOpaquePort(t *testing.T) {
	port := echoApp(t)
	p := startProxy(t, Config{DefaultPort: port, OpaquePorts: []uint16{port}}, Deps{})
	conn, err := client{proxy: p.addr}.dial(context.Background(), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := echo(t, conn, "GET / HTTP/1.1\n")
	if err != nil || got != "GET / HTTP/1.1\nbye\n" {
		t.Fatalf("opaque port: %q %v", got, err)
	}
	if !strings.Contains(strings.Join(p.Warnings(), "\n"), "no policy service") {
		t.Errorf("warnings: %v", p.Warnings())
	}
}
