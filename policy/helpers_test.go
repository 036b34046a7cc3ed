package policy

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/linkerd/linkerd2-proxy-api/go/inbound"
	"github.com/meridian-mesh/meridian/internal/grpcserver"
	"github.com/meridian-mesh/meridian/internal/serve"
	"github.com/meridian-mesh/meridian/internal/testutil"
	"github.com/meridian-mesh/meridian/policy/api"
	"github.com/meridian-mesh/meridian/policy/compute"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

const gatewayID = "api-gateway.shop.serviceaccount.identity.linkerd.cluster.local"

// wait bounds every wait in these tests.
const wait = 20 * time.Second

// manifests decodes YAML documents into resources, failing the test on any error.
func manifests(t testing.TB, docs ...string) []api.Resource {
	t.Helper()
	rs, errs := DecodeManifests("test", []byte(strings.Join(docs, "\n---\n")))
	if len(errs) > 0 {
		t.Fatalf("manifests: %v", errs)
	}
	return rs
}

// seedResources decodes every manifest of testdata/mesh.
func seedResources(t testing.TB) []api.Resource {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "mesh", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("testdata: %v", err)
	}
	var rs []api.Resource
	for _, f := range files {
		r, errs := DecodeManifests(f, []byte(readTestdata(t, filepath.Base(f))))
		if len(errs) > 0 {
			t.Fatalf("testdata: %v", errs)
		}
		rs = append(rs, r...)
	}
	return rs
}

func readTestdata(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "mesh", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

type testEnv struct {
	idx     *Index
	metrics *Metrics
	reg     *prometheus.Registry
	client  inbound.InboundServerPoliciesClient
}

// startSeeded is startServer with the seed example's resources (seedResources), and a
// context for the test's calls that ends after wait, or with the test.
func startSeeded(t *testing.T) (*testEnv, context.Context) {
	t.Helper()
	env := startServer(t, seedResources(t)...)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	t.Cleanup(cancel)
	return env, ctx
}

// startServer serves an Index over gRPC on 127.0.0.1 and returns a real client to it.
func startServer(t *testing.T, rs ...api.Resource) *testEnv {
	t.Helper()
	log := zaptest.NewLogger(t)
	reg := prometheus.NewRegistry()
	metrics := NewMetrics(reg)
	cfg := compute.DefaultConfig()
	idx := NewIndex(&cfg, log, metrics)
	for _, r := range rs {
		idx.Apply(r)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	srv := grpcserver.New(reg)
	inbound.RegisterInboundServerPoliciesServer(srv, NewServer(idx, log, ctx.Done()))
	done := make(chan error, 1)
	go func() { done <- grpcserver.Serve(ctx, srv, lis, 5*time.Second) }()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		cancel()
		if err := testutil.Recv(t, done, wait, "the gRPC server to stop"); err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return &testEnv{idx: idx, metrics: metrics, reg: reg, client: inbound.NewInboundServerPoliciesClient(conn)}
}

// recv receives one message from a watch, with a deadline.
func recv(t *testing.T, s inbound.InboundServerPolicies_WatchPortClient) *inbound.Server {
	t.Helper()
	type result struct {
		m   *inbound.Server
		err error
	}
	ch := make(chan result, 1)
	go func() {
		m, err := s.Recv()
		ch <- result{m, err}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("recv: %v", r.err)
		}
		return r.m
	case <-time.After(wait):
		t.Fatal("no message from WatchPort within the deadline")
		return nil
	}
}

func counterValue(t *testing.T, c prometheus.Collector) float64 {
	t.Helper()
	ch := make(chan prometheus.Metric, 1)
	c.Collect(ch)
	var m dto.Metric
	if err := (<-ch).Write(&m); err != nil {
		t.Fatal(err)
	}
	if m.Counter != nil {
		return m.Counter.GetValue()
	}
	return m.Gauge.GetValue()
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	eventuallyWithin(t, wait, what, cond)
}

func eventuallyWithin(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func identities(s *inbound.Server) []string {
	var out []string
	for _, a := range s.GetAuthorizations() {
		for _, id := range a.GetAuthentication().GetMeshTLS().GetIdentities().GetIdentities() {
			out = append(out, a.GetLabels()["name"]+"="+id.GetName())
		}
	}
	return out
}

// listenController builds a controller on src and the process serving it (gRPC and admin on
// 127.0.0.1, metrics on reg), and binds the listeners; the caller runs the process.
func listenController(t *testing.T, cfg Config, src Source, reg *prometheus.Registry, log *zap.Logger) *serve.Process {
	t.Helper()
	ctrl, err := New(cfg, Deps{Source: src, Registerer: reg, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	p := serve.New(log, "127.0.0.1:0")
	p.Registry = reg
	ctrl.Register(p.WithGRPC("127.0.0.1:0"))
	p.Group.Add("policy", ctrl)
	if err := p.Listen(); err != nil {
		t.Fatal(err)
	}
	return p
}
