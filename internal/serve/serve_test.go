package serve

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"math/big"
	"net/http"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/meridian-mesh/meridian/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.Main(m, nil)) }

// selfSigned returns a certificate for name and a pool trusting it.
func selfSigned(t *testing.T, name string) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), DNSNames: []string{name},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool
}

// check calls the health service at addr, in plaintext unless opts say otherwise.
func check(ctx context.Context, addr string, opts ...grpc.DialOption) error {
	conn, err := grpc.NewClient(addr, append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)...)
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err = healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	return err
}

// TestGRPCWithLocalPlaintextListener: the API serves TLS on its address and plaintext on the
// local one, from one server; a plaintext client is refused on the TLS address.
func TestGRPCWithLocalPlaintextListener(t *testing.T) {
	crt, pool := selfSigned(t, "api.test")
	p := New(nil, "127.0.0.1:0")
	srv, err := p.WithGRPCConfig(GRPC{Addr: "127.0.0.1:0", LocalAddr: "127.0.0.1:0",
		Creds: credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{crt}, MinVersion: tls.VersionTLS13})})
	if err != nil {
		t.Fatal(err)
	}
	healthpb.RegisterHealthServer(srv, health.NewServer())
	if err := p.Listen(); err != nil {
		t.Fatal(err)
	}
	testutil.Go(t, "the process", p.Run)
	ctx := context.Background()
	tlsAddr, local := p.Addr().String(), p.LocalAddr().String()
	tlsCreds := grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: pool, ServerName: "api.test"}))
	if err := check(ctx, tlsAddr, tlsCreds); err != nil {
		t.Errorf("TLS client on the TLS address: %v", err)
	}
	if err := check(ctx, local); err != nil {
		t.Errorf("plaintext client on the local address: %v", err)
	}
	if err := check(ctx, tlsAddr); err == nil {
		t.Error("a plaintext client was served on the TLS address")
	}
	if err := check(ctx, local, tlsCreds); err == nil {
		t.Error("a TLS client was served on the plaintext local address")
	}
	resp, err := http.Get("http://" + p.AdminAddr().String() + "/ready")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/ready = %s", resp.Status)
	}
}

// TestStopTimeoutCoversGrace: a process whose gRPC server drains for Grace waits for its
// group that long and StopMargin more, not run.DefaultStopTimeout (10 s), which cut a longer
// grace short with "did not stop within 10s: grpc".
func TestStopTimeoutCoversGrace(t *testing.T) {
	p := New(nil, "127.0.0.1:0")
	p.WithGRPC("127.0.0.1:0")
	p.Grace = 30 * time.Second
	if err := p.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := p.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if got := p.Group.StopTimeout; got != 30*time.Second+StopMargin {
		t.Fatalf("StopTimeout = %v, want the grace and StopMargin", got)
	}
}

func TestLocalAddrMustBeLoopback(t *testing.T) {
	for addr, ok := range map[string]bool{
		"127.0.0.1:8086": true, "127.3.4.5:1": true, "[::1]:8086": true, "localhost:8086": true,
		":8086": false, "0.0.0.0:8086": false, "10.0.0.1:8086": false, "example.com:8086": false, "127.0.0.1": false,
	} {
		err := CheckLocalAddr(addr)
		if (err == nil) != ok {
			t.Errorf("CheckLocalAddr(%q) = %v", addr, err)
		}
		if err != nil && !strings.Contains(err.Error(), addr) {
			t.Errorf("error %q does not name %q", err, addr)
		}
		if !ok {
			if _, err := New(nil, "127.0.0.1:0").WithGRPCConfig(GRPC{Addr: "127.0.0.1:0", LocalAddr: addr}); err == nil {
				t.Errorf("WithGRPCConfig accepted LocalAddr %q", addr)
			}
		}
	}
}

// TestRegistryHeapLive: a process's registry exports the live heap the last collection found
// (go_gc_heap_live_bytes), which the bench harness reads, beside the MemStats gauges, and the
// scheduling latencies (go_sched_latencies_seconds).
func TestRegistryHeapLive(t *testing.T) {
	keep := make([]byte, 8<<20) // live across the collection below
	runtime.GC()
	mfs, err := NewRegistry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		if len(mf.GetMetric()) == 1 && mf.GetMetric()[0].GetGauge() != nil {
			got[mf.GetName()] = mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	runtime.KeepAlive(keep)
	live, ok := got["go_gc_heap_live_bytes"]
	if !ok {
		t.Fatalf("no go_gc_heap_live_bytes gauge among %d families", len(mfs))
	}
	if live < float64(len(keep)) {
		t.Errorf("go_gc_heap_live_bytes = %v, want at least the %d bytes kept live", live, len(keep))
	}
	if _, ok := got["go_memstats_heap_alloc_bytes"]; !ok {
		t.Error("the MemStats gauges are gone (go_memstats_heap_alloc_bytes)")
	}
	sched := false
	for _, mf := range mfs {
		if mf.GetName() == "go_sched_latencies_seconds" && len(mf.GetMetric()) == 1 && mf.GetMetric()[0].GetHistogram().GetSampleCount() > 0 {
			sched = true
		}
	}
	if !sched {
		t.Error("no go_sched_latencies_seconds histogram with samples")
	}
}
