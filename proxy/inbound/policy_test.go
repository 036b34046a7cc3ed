package inbound

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/meridian-mesh/meridian/internal/testutil"
	"github.com/meridian-mesh/meridian/proxy/internal/proxytest"
	"github.com/meridian-mesh/meridian/proxy/transportheader"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// The clients dial from 127.0.0.2: 127.0.0.1 is localhost, which every policy allows.
const clientAddr = "127.0.0.2"

// TestPolicy: the policy from Meridian's policy service is enforced per request and per
// connection, and counted.
func TestPolicy(t *testing.T) {
	pki := testutil.NewPKI(t)
	httpPort, echoPort, grpcPort := httpApp(t), echoApp(t), grpcApp(t)
	ctl := startController(t, meshYAML(httpPort, echoPort, grpcPort))
	p := policyProxy(t, pki, ctl.Addr, "all-unauthenticated", httpPort)
	gateway := client{proxy: p.addr, tls: proxytest.TLS(t, pki, gatewayID), from: clientAddr}
	other := client{proxy: p.addr, tls: proxytest.TLS(t, pki, otherID), from: clientAddr}
	plain := client{proxy: p.addr, from: clientAddr}

	// HTTP: per request.
	if res, body := get(t, gateway.httpClient(t, httpPort), "/api", nil); res.StatusCode != http.StatusOK || body != "path=/api" {
		t.Fatalf("gateway: %d %q", res.StatusCode, body)
	}
	res, body := get(t, other.httpClient(t, httpPort), "/api", nil)
	if res.StatusCode != http.StatusForbidden || strings.Contains(body, "path=") || res.Header.Get("L5d-Proxy-Error") == "" {
		t.Fatalf("other identity: %d %q %v", res.StatusCode, body, res.Header)
	}
	if res, _ := get(t, plain.httpClient(t, 0), "/ready", nil); res.StatusCode != http.StatusOK {
		t.Errorf("probe path, plaintext: %d", res.StatusCode)
	}
	if res, _ := get(t, plain.httpClient(t, 0), "/api", nil); res.StatusCode != http.StatusForbidden {
		t.Errorf("plaintext: %d", res.StatusCode)
	}
	if res, _ := get(t, client{proxy: p.addr}.httpClient(t, 0), "/api", nil); res.StatusCode != http.StatusOK {
		t.Errorf("plaintext from localhost: %d, want the localhost authorization to allow it", res.StatusCode)
	}
	for _, tc := range []struct {
		family string
		labels map[string]string
		want   float64
	}{
		{"inbound_http_authz_allow_total", map[string]string{"srv_name": "web-http", "authz_name": "gateway-only", "client_id": gatewayID, "tls": "true"}, 1},
		{"inbound_http_authz_allow_total", map[string]string{"srv_name": "web-http", "authz_name": "probe", "tls": "no_identity"}, 1},
		{"inbound_http_authz_allow_total", map[string]string{"srv_name": "web-http", "authz_name": "localhost"}, 1},
		{"inbound_http_authz_deny_total", map[string]string{"srv_name": "web-http", "client_id": otherID, "tls": "true"}, 1},
		{"inbound_http_authz_deny_total", map[string]string{"srv_name": "web-http", "client_id": ""}, 1},
		{"response_total", map[string]string{"srv_name": "web-http", "status_code": "403"}, 2},
	} {
		if got := p.counter(t, tc.family, tc.labels); got != tc.want {
			t.Errorf("%s%v = %v, want %v", tc.family, tc.labels, got, tc.want)
		}
	}

	// gRPC: PERMISSION_DENIED for the other identity.
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if _, err := healthpb.NewHealthClient(gateway.grpcConn(t, grpcPort)).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Errorf("gRPC from the gateway: %v", err)
	}
	_, err := healthpb.NewHealthClient(other.grpcConn(t, grpcPort)).Check(ctx, &healthpb.HealthCheckRequest{})
	if status.Code(err) != codes.PermissionDenied {
		t.Errorf("gRPC from another identity: %v, want PermissionDenied", err)
	}

	// TCP: per connection; a denied connection is closed before any byte reaches the app.
	opaque := &transportheader.Header{Port: echoPort}
	conn, err := other.dial(ctx, "", opaque)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := echo(t, conn, "hello\n"); got != "" {
		t.Errorf("denied TCP connection read %q", got)
	}
	conn, err = gateway.dial(ctx, "", opaque)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := echo(t, conn, "hello\n"); err != nil || got != "hello\nbye\n" {
		t.Errorf("allowed TCP connection: %q %v", got, err)
	}
	if d, a := p.counter(t, "inbound_tcp_authz_deny_total", map[string]string{"srv_name": "web-echo", "client_id": otherID}),
		p.counter(t, "inbound_tcp_authz_allow_total", map[string]string{"srv_name": "web-echo", "authz_name": "gateway-only"}); d != 1 || a != 1 {
		t.Errorf("tcp authz: deny %v allow %v", d, a)
	}

	// A policy change that no longer allows an open connection closes it.
	conn, err = gateway.dial(ctx, "", opaque)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "one\n"); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	_ = conn.SetReadDeadline(time.Now().Add(wait))
	if _, err := io.ReadFull(conn, buf); err != nil || string(buf) != "one\n" {
		t.Fatalf("before the change: %q %v", buf, err)
	}
	proxytest.ApplyPolicy(t, ctl.Index, authorize("web"))
	if _, err := conn.Read(buf); err == nil {
		t.Fatal("the connection is still open after the policy stopped allowing it")
	}
	testutil.Eventually(t, wait, "the re-authorization counted as a deny", func() bool {
		return p.counter(t, "inbound_tcp_authz_deny_total", map[string]string{"srv_name": "web-echo", "client_id": gatewayID}) == 1
	})
}

// TestPolicyServiceDown: while the policy service is unreachable the last policy received
// still applies, and a proxy that never got one applies its configured default.
func TestPolicyServiceDown(t *testing.T) {
	pki := testutil.NewPKI(t)
	httpPort, echoPort := httpApp(t), echoApp(t)
	ctl := startController(t, meshYAML(httpPort, echoPort, 1))
	p := policyProxy(t, pki, ctl.Addr, "all-unauthenticated", httpPort)
	other := client{proxy: p.addr, tls: proxytest.TLS(t, pki, otherID), from: clientAddr}
	gateway := client{proxy: p.addr, tls: proxytest.TLS(t, pki, gatewayID), from: clientAddr}
	if res, _ := get(t, other.httpClient(t, httpPort), "/", nil); res.StatusCode != http.StatusForbidden {
		t.Fatalf("with the service up: %d", res.StatusCode)
	}

	ctl.Stop()
	testutil.Eventually(t, wait, "a warning for the stale policy", func() bool {
		w := strings.Join(p.Warnings(), "\n")
		return strings.Contains(w, "unavailable") && strings.Contains(w, "the last policy received (server web-http)")
	})
	if res, _ := get(t, other.httpClient(t, httpPort), "/", nil); res.StatusCode != http.StatusForbidden {
		t.Errorf("the last policy is not applied: %d (the default would allow)", res.StatusCode)
	}
	if res, _ := get(t, gateway.httpClient(t, httpPort), "/", nil); res.StatusCode != http.StatusOK {
		t.Errorf("the gateway under the last policy: %d", res.StatusCode)
	}

	// Fresh proxies that never reach the service: the default policy of their config.
	deny := policyProxy(t, pki, ctl.Addr, "deny", httpPort)
	if res, _ := get(t, client{proxy: deny.addr, from: clientAddr}.httpClient(t, 0), "/", nil); res.StatusCode != http.StatusForbidden {
		t.Errorf("default deny: %d", res.StatusCode)
	}
	if got := deny.counter(t, "inbound_http_authz_deny_total", map[string]string{"srv_name": "deny"}); got != 1 {
		t.Errorf("default deny counted %v denies", got)
	}
	conn, err := client{proxy: deny.addr, tls: proxytest.TLS(t, pki, gatewayID), from: clientAddr}.dial(context.Background(), "", &transportheader.Header{Port: echoPort})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := echo(t, conn, "x\n"); got != "" || (err != nil && !closedByPeer(err)) {
		t.Errorf("default deny, TCP: %q %v", got, err)
	}
	allow := policyProxy(t, pki, ctl.Addr, "all-unauthenticated", httpPort)
	if res, _ := get(t, client{proxy: allow.addr, from: clientAddr}.httpClient(t, 0), "/", nil); res.StatusCode != http.StatusOK {
		t.Errorf("default all-unauthenticated: %d", res.StatusCode)
	}
	if !strings.Contains(strings.Join(allow.Warnings(), "\n"), "the default policy (all-unauthenticated)") {
		t.Errorf("warnings: %v", allow.Warnings())
	}
}
