package policy

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/linkerd/linkerd2-proxy-api/go/inbound"
	"github.com/meridian-mesh/meridian/internal/testutil"
	mpolicy "github.com/meridian-mesh/meridian/policy"
	"github.com/meridian-mesh/meridian/policy/compute"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"
)

func TestMain(m *testing.M) { os.Exit(testutil.Main(m, nil)) }

// wait bounds every wait in these tests.
const wait = 20 * time.Second

const (
	gatewayID = "api-gateway.shop.serviceaccount.identity.linkerd.cluster.local"
	webID     = "web.shop.serviceaccount.identity.linkerd.cluster.local"
)

// seedYAML is the policy controller's seed mesh (policy/testdata/mesh).
func seedYAML(t testing.TB) string {
	t.Helper()
	var b strings.Builder
	for _, f := range []string{"pods.yaml", "policy.yaml"} {
		data, err := os.ReadFile("../../../policy/testdata/mesh/" + f)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(data)
		b.WriteString("\n---\n")
	}
	return b.String()
}

// controllerPolicy is what the policy controller sends for a pod port.
func controllerPolicy(t testing.TB, idx *mpolicy.Index, pod string, port uint32) *inbound.Server {
	t.Helper()
	res, err := idx.Lookup(compute.Key{Namespace: "shop", Name: pod}, port)
	if err != nil {
		t.Fatal(err)
	}
	return res.Server
}

func runWatcher(t *testing.T, cfg WatchConfig, conn grpc.ClientConnInterface, fallback *Server) *Watcher {
	t.Helper()
	w := NewWatcher(cfg, conn, fallback, zaptest.NewLogger(t))
	testutil.Go(t, "Watcher.Run", w.Run)
	return w
}

func mustDefault(t testing.TB, name string) *Server {
	t.Helper()
	s, err := Default(name, compute.DefaultConfig().ClusterNetworks, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// waitClosed fails t unless ch is closed within d.
func waitClosed[T any](t testing.TB, ch <-chan T, d time.Duration, what string) {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ch:
	case <-timer.C:
		t.Fatalf("timed out after %v waiting for %s", d, what)
	}
}
