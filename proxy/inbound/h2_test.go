package inbound

import (
	"context"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/meridian-mesh/meridian/internal/testutil"
	"github.com/meridian-mesh/meridian/proxy/internal/proxytest"
)

// seenHealth is a health service that answers with what it saw of each call's metadata
// (in the response header).
type seenHealth struct {
	healthpb.UnimplementedHealthServer
}

func (seenHealth) Check(ctx context.Context, _ *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	_ = grpc.SetHeader(ctx, metadata.Pairs("x-seen-client-id", strings.Join(md.Get("l5d-client-id"), ",")))
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}

// TestLeanHTTP2: gRPC over mTLS with the transport header (HTTP2) is relayed to the
// application: it sees the client's proven identity in l5d-client-id (never one the client
// sent), the calls are authorized and counted, and an application that is down is
// UNAVAILABLE with l5d-proxy-error. The session and the connection to the application read
// and write with ordinary system calls: rawio.Ordinary finds the raw connection under each.
func TestLeanHTTP2(t *testing.T) {
	found := proxytest.RecordFound(t, &ordinary)
	addr := testutil.ServeGRPC(t, func(s *grpc.Server) { healthpb.RegisterHealthServer(s, seenHealth{}) })
	_, ps, _ := net.SplitHostPort(addr)
	port := uint16(mustAtoi(t, ps))
	pki := testutil.NewPKI(t)
	p := startProxy(t, Config{DefaultPort: port, Identity: serverID}, Deps{TLS: proxytest.TLS(t, pki, serverID)})
	hc := healthpb.NewHealthClient(client{proxy: p.addr, tls: proxytest.TLS(t, pki, gatewayID)}.grpcConn(t, port))
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	for range 5 {
		var hdr metadata.MD
		out := metadata.AppendToOutgoingContext(ctx, "l5d-client-id", "spoofed")
		if _, err := hc.Check(out, &healthpb.HealthCheckRequest{}, grpc.Header(&hdr)); err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(hdr.Get("x-seen-client-id"), ","); got != gatewayID {
			t.Fatalf("the application saw l5d-client-id %q", got)
		}
	}
	if got := p.counter(t, "response_total", map[string]string{"direction": "inbound", "client_id": gatewayID, "grpc_status": "0", "classification": "success"}); got != 5 {
		t.Errorf("response_total = %v, want 5", got)
	}
	if got := p.counter(t, "inbound_http_authz_allow_total", map[string]string{"client_id": gatewayID}); got != 5 {
		t.Errorf("inbound_http_authz_allow_total = %v, want 5", got)
	}
	if got := found(); !slices.Equal(got, []bool{true, true}) {
		t.Errorf("rawio.Ordinary found %v; want [true true] (the session, the application's connection)", got)
	}

	lis := testutil.Listen(t)
	down := uint16(lis.Addr().(*net.TCPAddr).Port)
	_ = lis.Close()
	_, err := healthpb.NewHealthClient(client{proxy: p.addr, tls: proxytest.TLS(t, pki, gatewayID)}.grpcConn(t, down)).Check(ctx, &healthpb.HealthCheckRequest{})
	if st, _ := status.FromError(err); st.Code() != codes.Unavailable || !strings.Contains(st.Message(), "application") {
		t.Errorf("an application that is down: %v, want UNAVAILABLE", err)
	}
}

// TestLeanHTTP2Plain: plain HTTP/2 requests on the relay: the request reaches the
// application with its path and body, and the proxy's own answers are HTTP statuses.
func TestLeanHTTP2Plain(t *testing.T) {
	lis := testutil.Listen(t)
	var h2c http.Protocols
	h2c.SetUnencryptedHTTP2(true)
	proxytest.Serve(t, &http.Server{Protocols: &h2c, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Seen-Client-Id", strings.Join(r.Header.Values("L5d-Client-Id"), ","))
		w.Header().Set("X-Seen-Proto", r.Proto)
		_, _ = io.WriteString(w, "path="+r.URL.Path)
	})}, lis)
	port := uint16(lis.Addr().(*net.TCPAddr).Port)
	p := startProxy(t, Config{DefaultPort: port}, Deps{})
	var pr http.Protocols
	pr.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: &pr, DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return client{proxy: p.addr}.dial(ctx, "", nil)
	}}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: wait}
	res, body := get(t, hc, "/h2?x=1", map[string]string{"L5d-Client-Id": "spoofed"})
	if res.StatusCode != http.StatusOK || body != "path=/h2" || res.ProtoMajor != 2 || res.Header.Get("X-Seen-Proto") != "HTTP/2.0" ||
		res.Header.Get("X-Seen-Client-Id") != "" {
		t.Errorf("%d %s %q %v", res.StatusCode, res.Proto, body, res.Header)
	}
}

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	n := 0
	for _, c := range s {
		if c < '0' || c > '9' {
			t.Fatalf("not a port: %q", s)
		}
		n = n*10 + int(c-'0')
	}
	return n
}

// TestLeanHTTP2Drain: when Run's context ends, the request in flight on an HTTP/2 session
// finishes and Run returns.
func TestLeanHTTP2Drain(t *testing.T) {
	lis := testutil.Listen(t)
	arrived, release := make(chan struct{}, 1), make(chan struct{})
	var h2c http.Protocols
	h2c.SetUnencryptedHTTP2(true)
	proxytest.Serve(t, &http.Server{Protocols: &h2c, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-release
		_, _ = io.WriteString(w, "done")
	})}, lis)
	in, cancel, r := runUntil(t, Config{DefaultPort: uint16(lis.Addr().(*net.TCPAddr).Port)}, Deps{})
	var pr http.Protocols
	pr.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: &pr, DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return client{proxy: in.Addr().String()}.dial(ctx, "", nil)
	}}
	defer tr.CloseIdleConnections()
	got := proxytest.GetAsync(&http.Client{Transport: tr, Timeout: wait}, "http://web/slow")
	testutil.Recv(t, arrived, wait, "the request to reach the application")
	cancel()
	close(release)
	if res := testutil.Recv(t, got, wait, "the response"); res.Err != nil || res.Body != "done" {
		t.Errorf("the request in flight: %+v", res)
	}
	r.wait(t, "Run to return")
}
