package h2

import (
	"context"
	"io"
	"net/http"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/meridian-mesh/meridian/internal/testutil"
)

// TestRelayGRPC: grpc-go's client and server speak through the relay: unary calls,
// a server stream (health Watch) that sees a change, and a status in trailers.
func TestRelayGRPC(t *testing.T) {
	hs := health.NewServer()
	up := testutil.ServeGRPC(t, func(s *grpc.Server) { healthpb.RegisterHealthServer(s, hs) })
	p := startRelay(t, up, Config{})
	conn, err := grpc.NewClient("passthrough:///"+p.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	hc := healthpb.NewHealthClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	for range 20 {
		res, err := hc.Check(ctx, &healthpb.HealthCheckRequest{})
		if err != nil || res.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("Check: %v %v", res, err)
		}
	}
	_, err = hc.Check(ctx, &healthpb.HealthCheckRequest{Service: "unknown"})
	if status.Code(err) != codes.NotFound {
		t.Errorf("Check of an unknown service: %v, want NotFound (the status from the trailers)", err)
	}
	w, err := hc.Watch(ctx, &healthpb.HealthCheckRequest{Service: "svc"})
	if err != nil {
		t.Fatal(err)
	}
	first, err := w.Recv()
	if err != nil || first.GetStatus() != healthpb.HealthCheckResponse_SERVICE_UNKNOWN {
		t.Fatalf("Watch: %v %v", first, err)
	}
	hs.SetServingStatus("svc", healthpb.HealthCheckResponse_NOT_SERVING)
	next, err := w.Recv()
	if err != nil || next.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("Watch after the change: %v %v", next, err)
	}
}

// BenchmarkRelay sends unary gRPC calls through the relay and directly; allocs/op include
// grpc-go's client and server (the relay's share is the difference to direct).
//
//	go test -run XXX -bench Relay -benchmem ./proxy/h2/
func BenchmarkRelay(b *testing.B) {
	up := testutil.ServeGRPC(b, func(s *grpc.Server) { healthpb.RegisterHealthServer(s, health.NewServer()) })
	p := startRelay(b, up, Config{})
	for _, bc := range []struct{ name, addr string }{{"direct", up}, {"relay", p.addr}} {
		b.Run(bc.name, func(b *testing.B) {
			conn, err := grpc.NewClient("passthrough:///"+bc.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				b.Fatal(err)
			}
			defer conn.Close()
			hc := healthpb.NewHealthClient(conn)
			ctx := context.Background()
			req := &healthpb.HealthCheckRequest{}
			if _, err := hc.Check(ctx, req); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if _, err := hc.Check(ctx, req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRelayHTTP is BenchmarkRelay with net/http's HTTP/2 client and server.
func BenchmarkRelayHTTP(b *testing.B) {
	body := []byte("ok")
	up := upstreamServer(b, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write(body) }))
	p := startRelay(b, up, Config{})
	for _, bc := range []struct{ name, addr string }{{"direct", up}, {"relay", p.addr}} {
		b.Run(bc.name, func(b *testing.B) {
			c := h2Client(b, bc.addr)
			req, _ := http.NewRequest("GET", "http://web/", nil)
			b.ReportAllocs()
			for b.Loop() {
				res, err := c.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
			}
		})
	}
}
