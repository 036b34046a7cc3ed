package proxytest

import (
	"context"
	"net"
	"strings"
	"testing"

	"github.com/linkerd/linkerd2-proxy-api/go/inbound"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"

	"github.com/meridian-mesh/meridian/internal/testutil"
	mpolicy "github.com/meridian-mesh/meridian/policy"
	"github.com/meridian-mesh/meridian/policy/compute"
)

// NewPolicyIndex is the policy controller's index (package policy, the default compute
// configuration) holding the Kubernetes manifests docs.
func NewPolicyIndex(t testing.TB, docs ...string) *mpolicy.Index {
	t.Helper()
	cfg := compute.DefaultConfig()
	idx := mpolicy.NewIndex(&cfg, zaptest.NewLogger(t), nil)
	ApplyPolicy(t, idx, docs...)
	return idx
}

// ApplyPolicy applies the manifests docs (YAML) to idx.
func ApplyPolicy(t testing.TB, idx *mpolicy.Index, docs ...string) {
	t.Helper()
	rs, errs := mpolicy.DecodeManifests("test", []byte(strings.Join(docs, "\n---\n")))
	if len(errs) > 0 {
		t.Fatalf("manifests: %v", errs)
	}
	for _, r := range rs {
		idx.Apply(r)
	}
}

// PolicyService is Meridian's policy controller (InboundServerPolicies) serving Index in
// process on loopback.
type PolicyService struct {
	Index *mpolicy.Index
	Addr  string
	// Stop ends the service and waits for it; it is also called when the test ends.
	Stop func()
}

// ServePolicy serves idx on addr ("127.0.0.1:0" for a free port) until Stop or the end of
// the test.
func ServePolicy(t testing.TB, idx *mpolicy.Index, addr string) *PolicyService {
	t.Helper()
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	srv := grpc.NewServer()
	inbound.RegisterInboundServerPoliciesServer(srv, mpolicy.NewServer(idx, zaptest.NewLogger(t), ctx.Done()))
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(lis) }()
	c := &PolicyService{Index: idx, Addr: lis.Addr().String()}
	stopped := false
	c.Stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		srv.Stop()
		testutil.Wait(t, Wait, "the policy service to stop", func() { <-done })
	}
	t.Cleanup(c.Stop)
	return c
}
