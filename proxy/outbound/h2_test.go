package outbound

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/meridian-mesh/meridian/internal/testutil"
	"github.com/meridian-mesh/meridian/proxy/internal/proxytest"
	"github.com/meridian-mesh/meridian/proxy/metrics"
)

// grpcThrough dials the proxy for authority (HTTP/2 with prior knowledge, routed by
// :authority) and returns a health client.
func grpcThrough(t testing.TB, proxy, authority string) healthpb.HealthClient {
	t.Helper()
	conn, err := grpc.NewClient("passthrough:///"+proxy, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithAuthority(authority))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return healthpb.NewHealthClient(conn)
}

// TestLeanHTTP2GRPC: gRPC through the explicit proxy is relayed to the endpoint over one
// multiplexed connection, a status in trailers reaches the client, and the requests are
// counted with their grpc-status. Both connections read and write with ordinary system
// calls: rawio.Ordinary finds the raw connection under each.
func TestLeanHTTP2GRPC(t *testing.T) {
	found := proxytest.RecordFound(t, &ordinary)
	hs := health.NewServer()
	app := testutil.ServeGRPC(t, func(s *grpc.Server) { healthpb.RegisterHealthServer(s, hs) })
	r := newFakeResolver()
	r.target(webAuth, plainEndpoint(netip.MustParseAddrPort(app)))
	reg := prometheus.NewRegistry()
	_, addr := startProxy(t, testConfig(), Deps{Resolver: r, Metrics: metrics.New(reg)})
	hc := grpcThrough(t, addr, webAuth)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for range 10 {
		if res, err := hc.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil || res.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("Check: %v %v", res, err)
		}
	}
	if _, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: "nope"}); status.Code(err) != codes.NotFound {
		t.Errorf("Check of an unknown service: %v, want NotFound", err)
	}
	testutil.Eventually(t, 10*time.Second, "the responses counted", func() bool {
		return proxytest.Gathered(t, reg, "response_total", map[string]string{"direction": "outbound", "authority": webAuth, "grpc_status": "0", "classification": "success"}) == 10 &&
			proxytest.Gathered(t, reg, "response_total", map[string]string{"grpc_status": "5", "classification": "failure"}) == 1
	})
	if n := proxytest.Gathered(t, reg, "tcp_open_total", map[string]string{"direction": "outbound", "authority": webAuth}); n != 1 {
		t.Errorf("%v connections to the endpoint, want 1 (multiplexed)", n)
	}
	if got := found(); !slices.Equal(got, []bool{true, true}) {
		t.Errorf("rawio.Ordinary found %v; want [true true] (the client's connection, the endpoint's)", got)
	}
}

// TestLeanHTTP2Errors: a gRPC request for a target without endpoints, or whose endpoint
// refuses connections, gets a trailers-only UNAVAILABLE with l5d-proxy-error; plain HTTP/2
// gets 503 and 502; CONNECT over HTTP/2 is refused as the net/http path refuses it.
func TestLeanHTTP2Errors(t *testing.T) {
	lis := testutil.Listen(t)
	closed := addrPort(t, lis.Addr())
	_ = lis.Close()
	r := newFakeResolver()
	r.target("empty.shop.svc.cluster.local:80")
	r.target(webAuth, plainEndpoint(closed))
	_, addr := startProxy(t, testConfig(), Deps{Resolver: r})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, tc := range []struct{ authority, want string }{
		{"empty.shop.svc.cluster.local:80", "no endpoints"},
		{webAuth, "upstream"},
	} {
		_, err := grpcThrough(t, addr, tc.authority).Check(ctx, &healthpb.HealthCheckRequest{})
		if st, _ := status.FromError(err); st.Code() != codes.Unavailable || !strings.Contains(st.Message(), tc.want) {
			t.Errorf("%s: %v, want UNAVAILABLE saying %q", tc.authority, err, tc.want)
		}
	}
	c := h2Client(t, addr)
	for _, tc := range []struct {
		authority string
		status    int
	}{{"empty.shop.svc.cluster.local:80", http.StatusServiceUnavailable}, {webAuth, http.StatusBadGateway}} {
		res, body := get(t, c, "http://"+tc.authority+"/")
		if res.StatusCode != tc.status || res.Header.Get("L5d-Proxy-Error") == "" {
			t.Errorf("%s: %d %q %v, want %d with l5d-proxy-error", tc.authority, res.StatusCode, body, res.Header, tc.status)
		}
	}
	req, _ := http.NewRequest(http.MethodConnect, "http://"+webAuth, nil)
	req.Host = webAuth
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusBadRequest {
		t.Errorf("CONNECT over HTTP/2: %d, want 400", res.StatusCode)
	}
}

// TestLeanHTTP2ConnectRetry: an endpoint that refuses the connection is retried once on
// another endpoint before anything was sent.
func TestLeanHTTP2ConnectRetry(t *testing.T) {
	lis := testutil.Listen(t)
	dead := addrPort(t, lis.Addr())
	_ = lis.Close()
	app := startApp(t, "alive")
	addr := proxyTo(t, plainEndpoint(dead), plainEndpoint(app))
	c := h2Client(t, addr)
	for i := range 6 {
		if res, body := get(t, c, "http://"+webAuth+"/"); res.StatusCode != 200 || body != "alive HTTP/2.0" {
			t.Fatalf("request %d: %d %q", i, res.StatusCode, body)
		}
	}
}

// TestLeanHTTP2Drain: when Serve's context ends, a request in flight on an HTTP/2
// connection finishes, the client is told to go away, and Serve returns.
func TestLeanHTTP2Drain(t *testing.T) {
	app, arrived, release := blockingApp(t)
	r := newFakeResolver()
	r.target(webAuth, plainEndpoint(addrPort(t, mustResolve(t, app))))
	_, addr, cancel, served := serve(t, testConfig(), Deps{Resolver: r})
	got := proxytest.GetAsync(h2Client(t, addr), "http://"+webAuth+"/")
	testutil.Recv(t, arrived, 10*time.Second, "the request to reach the app")
	cancel()
	close(release)
	if res := testutil.Recv(t, got, 10*time.Second, "the response"); res.Err != nil || res.Body != "done" {
		t.Errorf("the request in flight: %+v", res)
	}
	if err := testutil.Recv(t, served, 10*time.Second, "Serve to return"); err != nil {
		t.Errorf("Serve: %v", err)
	}
}

// TestGRPCServerFailure: the balancer counts as an endpoint's failure only the grpc-status
// codes that map to a 5xx; the application's own answers (NotFound, PermissionDenied, ...)
// are not the endpoint failing.
func TestGRPCServerFailure(t *testing.T) {
	for code := codes.OK; code <= codes.Unauthenticated; code++ {
		want := false
		switch code {
		case codes.Unknown, codes.DeadlineExceeded, codes.Unimplemented, codes.Internal, codes.Unavailable, codes.DataLoss:
			want = true
		}
		if got := grpcServerFailure(strconv.Itoa(int(code))); got != want {
			t.Errorf("%s: server failure %v, want %v", code, got, want)
		}
	}
	if grpcServerFailure("") || grpcServerFailure("x") {
		t.Error("no or a malformed grpc-status counted as a server failure")
	}
}

// TestLeanHTTP2RetiredEndpoint: an endpoint that left its target after a request picked it
// (the race between a pick and the endpoint's retirement) answers with a connect error, so
// the request moves to another endpoint instead of failing with 502; a connection dialled
// before the retirement is not pooled.
func TestLeanHTTP2RetiredEndpoint(t *testing.T) {
	hs := health.NewServer()
	app := testutil.ServeGRPC(t, func(s *grpc.Server) { healthpb.RegisterHealthServer(s, hs) })
	o, _ := startProxy(t, testConfig(), Deps{Resolver: newFakeResolver()})
	e := newEndpoint(o, webAuth, plainEndpoint(netip.MustParseAddrPort(app)))
	e.retire()
	if _, err := e.leanConn2(o); !isConnectError(err) || !errors.Is(err, errRetired) {
		t.Errorf("a retired endpoint: %v, want a connect error (retried elsewhere)", err)
	}
	e2 := newEndpoint(o, webAuth, plainEndpoint(netip.MustParseAddrPort(app)))
	e2.leanH2.CloseIdle(time.Now(), true) // the pool retired between the check and Add
	if _, err := e2.leanConn2(o); !isConnectError(err) || !errors.Is(err, errRetired) {
		t.Errorf("retired during the dial: %v, want a connect error", err)
	}
}
