package inbound

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/meridian-mesh/meridian/proxy/inbound/policy"
	"github.com/meridian-mesh/meridian/proxy/internal/proxytest"
)

// TestHostNotUTF8: a Host with a byte that is not UTF-8 (HTTP/1 lets 0x80-0xFF through)
// becomes a metric label; Prometheus panics on such a label value, which took the whole
// proxy down, before authorization, for any client that reached the inbound port. The
// request is answered (here refused: a plaintext client under all-authenticated), and the
// proxy serves the next one.
func TestHostNotUTF8(t *testing.T) {
	app := startScriptedApp(t, func(int64) (string, bool) { return okResponse, false })
	p := startProxy(t, Config{DefaultPort: app.Port(), DefaultPolicy: policy.DefaultAllAuthenticated}, Deps{})
	for _, host := range []string{"web\xff:8080", "web:8080"} {
		res := proxytest.Exchange(t, proxytest.Dial(t, p.addr), "GET / HTTP/1.1\r\nHost: "+host+"\r\n\r\n", 1, http.MethodGet)
		if res[0].StatusCode != http.StatusForbidden {
			t.Errorf("Host %q: status %d, want 403 (a plaintext client under all-authenticated)", host, res[0].StatusCode)
		}
	}
}

// TestRefusedRequestsHaveNoAuthority: a request the policy refuses is counted without its
// authority, on each HTTP path (the lean HTTP/1 one, net/http's, HTTP/2's). Before, a client
// that the policy refuses could send Hosts of its choosing until the series' bound
// (metrics.MaxRoutes) was full, after which the routes of the clients the policy admits read
// authority="other". An admitted request keeps its authority.
func TestRefusedRequestsHaveNoAuthority(t *testing.T) {
	app := startScriptedApp(t, func(int64) (string, bool) { return okResponse, false })
	p := startProxy(t, Config{DefaultPort: app.Port(), DefaultPolicy: policy.DefaultAllAuthenticated}, Deps{})
	hosts := []string{"a.example:80", "b.example:80", "c.example:80"}
	for _, host := range hosts {
		for _, req := range []string{
			"GET / HTTP/1.1\r\nHost: " + host + "\r\n\r\n",                                         // the lean path
			"POST / HTTP/1.1\r\nHost: " + host + "\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", // net/http's
		} {
			method, _, _ := strings.Cut(req, " ")
			if res := proxytest.Exchange(t, proxytest.Dial(t, p.addr), req, 1, method); res[0].StatusCode != http.StatusForbidden {
				t.Errorf("%s with Host %s: status %d, want 403 (a plaintext client under all-authenticated)", method, host, res[0].StatusCode)
			}
		}
		conn, err := grpc.NewClient("passthrough:///"+host, grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithAuthority(host), grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, "tcp", p.addr)
			}))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		_, err = healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
		cancel()
		_ = conn.Close()
		if status.Code(err) != codes.PermissionDenied {
			t.Errorf("gRPC with authority %s: %v, want PermissionDenied", host, err)
		}
	}
	for _, host := range hosts {
		if got := p.counter(t, "request_total", map[string]string{"authority": host}); got != 0 {
			t.Errorf("request_total{authority=%q} = %v, want no series: the request was refused", host, got)
		}
	}
	n := float64(len(hosts))
	for _, tc := range []struct {
		labels map[string]string
		want   float64
	}{
		{map[string]string{"authority": "", "status_code": "403"}, 2 * n},
		{map[string]string{"authority": "", "status_code": "200", "grpc_status": "7"}, n},
	} {
		if got := p.counter(t, "response_total", tc.labels); got != tc.want {
			t.Errorf("response_total%v = %v, want %v", tc.labels, got, tc.want)
		}
	}
	if got := p.counter(t, "request_total", map[string]string{"authority": ""}); got != 3*n {
		t.Errorf("request_total{authority=\"\"} = %v, want %v", got, 3*n)
	}

	open := startProxy(t, Config{DefaultPort: app.Port(), DefaultPolicy: policy.DefaultAllUnauthenticated}, Deps{})
	if res := proxytest.Exchange(t, proxytest.Dial(t, open.addr), "GET / HTTP/1.1\r\nHost: web:8080\r\n\r\n", 1, http.MethodGet); res[0].StatusCode != http.StatusOK {
		t.Fatalf("admitted request: status %d", res[0].StatusCode)
	}
	if got := open.counter(t, "response_total", map[string]string{"authority": "web:8080", "status_code": "200"}); got != 1 {
		t.Errorf("admitted request: response_total{authority=web:8080} = %v, want 1", got)
	}
}
