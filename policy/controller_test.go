package policy

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/linkerd/linkerd2-proxy-api/go/inbound"
	"github.com/meridian-mesh/meridian/internal/manifest"
	"github.com/meridian-mesh/meridian/internal/testutil"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

func copyTestdata(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, f := range []string{"pods.yaml", "policy.yaml"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(readTestdata(t, f)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	c := &http.Client{Timeout: wait}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestServeFromDirectory runs the whole controller (dir source, gRPC, admin) on loopback:
// the watch sees an edit of a manifest file, /ready turns ready after the first read,
// /metrics shows the policy and gRPC metrics, and everything stops without leaking goroutines.
func TestServeFromDirectory(t *testing.T) {
	testutil.VerifyNone(t)
	dir := copyTestdata(t)
	log := zaptest.NewLogger(t)
	reg := prometheus.NewRegistry()
	metrics := NewMetrics(reg)
	cfg := DefaultConfig()
	cfg.Source = "dir:" + dir
	if _, err := NewSource(cfg, reg, log, metrics); err != nil {
		t.Fatal(err)
	}
	mcfg := manifest.DefaultConfig(dir)
	mcfg.Debounce = 10 * time.Millisecond
	src := NewDirSource(mcfg, reg, log, metrics)
	p := listenController(t, cfg, src, reg, log)
	grpcLis, adminLis := p.Addr(), p.AdminAddr()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- p.Run(ctx) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := testutil.Recv(t, served, wait, "the controller to stop"); err != nil {
			t.Errorf("Run: %v", err)
		}
	}
	defer stop()

	admin := "http://" + adminLis.String()
	eventually(t, "/ready", func() bool { code, _ := httpGet(t, admin+"/ready"); return code == http.StatusOK })

	conn, err := grpc.NewClient(grpcLis.String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := inbound.NewInboundServerPoliciesClient(conn)
	wctx, wcancel := context.WithTimeout(ctx, wait)
	defer wcancel()
	stream, err := client.WatchPort(wctx, &inbound.PortSpec{Workload: `{"ns":"shop","pod":"web-0"}`, Port: 8080})
	if err != nil {
		t.Fatal(err)
	}
	if ids := identities(recv(t, stream)); !slices.Equal(ids, []string{"web-from-gateway=" + gatewayID}) {
		t.Fatalf("first = %v", ids)
	}

	// Edit the manifest: the gateway's ServiceAccount is renamed.
	edited := strings.Replace(readTestdata(t, "policy.yaml"), "name: api-gateway", "name: edge-gateway", 1)
	tmp := filepath.Join(dir, ".policy.yaml.tmp")
	if err := os.WriteFile(tmp, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "policy.yaml")); err != nil {
		t.Fatal(err)
	}
	want := "web-from-gateway=edge-gateway.shop.serviceaccount.identity.linkerd.cluster.local"
	if ids := identities(recv(t, stream)); !slices.Equal(ids, []string{want}) {
		t.Fatalf("after the edit = %v", ids)
	}

	// The server counts an update after its Send returns, which can be after the client has
	// it: the figures are read until they hold, within a deadline.
	testutil.EventuallyNoError(t, 10*time.Second, "the controller's metrics", func() error {
		code, body := httpGet(t, admin+"/metrics")
		for _, m := range []string{"policy_watches 1", `policy_index_objects{kind="Pod"} 2`, `policy_index_objects{kind="Server"} 1`, "policy_watch_updates_sent_total 2", "grpc_server_started_total"} {
			if code != http.StatusOK || !strings.Contains(body, m) {
				return fmt.Errorf("/metrics lacks %q", m)
			}
		}
		return nil
	})
	wcancel()
	conn.Close()
	stop()
}

// TestServeBadSource: an unusable source fails the controller instead of serving nothing.
func TestServeBadSource(t *testing.T) {
	cfg := DefaultConfig()
	for _, s := range []string{"dir:", "files", "dir:/nonexistent/meridian"} {
		cfg.Source = s
		src, err := NewSource(cfg, nil, zaptest.NewLogger(t), nil)
		if err != nil {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		err = src.Run(ctx, NewIndex(&cfg.Compute, zaptest.NewLogger(t), nil))
		cancel()
		if err == nil {
			t.Errorf("source %q ran", s)
		}
	}
}
