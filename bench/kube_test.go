package bench

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/meridian-mesh/meridian/bench/gen"
	"github.com/meridian-mesh/meridian/internal/kubetest"
)

// kubeConfig is a small run on the real API server: 40 services of two slices (150
// endpoints), churn with scale-ups and scale-downs.
func kubeConfig(t *testing.T) Config {
	t.Helper()
	kubetest.SkipUnlessAvailable(t)
	cfg := testConfig(t, gen.Config{Seed: 7, Services: 40, EndpointsPerService: 150, Namespaces: 4, MeshedShare: 0.8, ControlPlaneNamespace: "linkerd"}, 40, 3*time.Second)
	cfg.Source, cfg.KubeAssets = SourceKubernetes, kubetest.AssetsDir()
	cfg.ScaleShare = 0.4
	return cfg
}

// TestKubernetesSource runs the harness against the kube-apiserver: 1 and 4 shards
// forwarding, with Pods behind the endpoints; then 4 shards redirecting, without Pods. Every
// stream ends on the truth, none is closed, every change is seen, and the API server's and
// etcd's RSS and every replica's idle heap are measured.
func TestKubernetesSource(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an API server and replica processes")
	}
	cfg := kubeConfig(t)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	fcfg := cfg
	fcfg.Shards, fcfg.KubePods = []int{1, 4}, true
	res := mustRun(ctx, t, fcfg)
	if len(res.Runs) != 2 || res.Source != SourceKubernetes || res.ClusterCreateSeconds <= 0 {
		t.Fatalf("%d runs, source %q, cluster created in %.2fs", len(res.Runs), res.Source, res.ClusterCreateSeconds)
	}
	rcfg := cfg
	rcfg.Shards, rcfg.NonOwner = []int{4}, "redirect"
	rcfg.KubePolicy = true // the replicas watch Nodes, Servers and ServiceProfiles too
	rres := mustRun(ctx, t, rcfg)
	if r := rres.Runs[0]; r.Redirects == 0 || r.ForwardedStreams != 0 {
		t.Errorf("redirect mode: %d redirects, %d forwarded streams", r.Redirects, r.ForwardedStreams)
	}
	res.Runs = append(res.Runs, rres.Runs[0])
	for _, r := range res.Runs {
		// The API server has the default namespace's kubernetes Service too.
		checkRun(t, r, cfg.Cluster.Services+1)
		if r.APIServerRSSBytes == 0 || r.EtcdRSSBytes == 0 {
			t.Errorf("%s: API server RSS %d, etcd RSS %d", r.Label(), r.APIServerRSSBytes, r.EtcdRSSBytes)
		}
		// The harness's own watch saw every write it answered, and nothing else.
		if r.APIWatchSamples != r.ChangesApplied || r.APIWatchMissed != 0 || r.APIWatchP50Ms <= 0 {
			t.Errorf("%s: API server watch: %d samples of %d changes, %d missed, p50 %.2f ms", r.Label(), r.APIWatchSamples, r.ChangesApplied, r.APIWatchMissed, r.APIWatchP50Ms)
		}
		if len(r.IdleHeapBytesPerShard) != r.Shards || r.IdleHeapBytesPerShard[0] == 0 {
			t.Errorf("%s: idle heap %v", r.Label(), r.IdleHeapBytesPerShard)
		}
		for _, k := range []gen.Kind{gen.Replace, gen.ScaleUp, gen.ScaleDown} {
			if r.ChangesByKind[k.String()] == 0 {
				t.Errorf("%s: changes by kind %v: no %s", r.Label(), r.ChangesByKind, k)
			}
		}
	}
	var tbl bytes.Buffer
	if err := WriteTable(&tbl, res); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", tbl.String())
}

// A missing API server binary is a clear error before anything starts.
func TestKubernetesSourceNoBinaries(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Source, cfg.KubeAssets, cfg.Binary = SourceKubernetes, t.TempDir(), "x"
	_, err := Run(context.Background(), cfg, zaptest.NewLogger(t))
	if err == nil || !strings.Contains(err.Error(), "make kube-bin") {
		t.Fatalf("err = %v, want one saying how to build the binaries", err)
	}
}
