package kubetest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/meridian-mesh/meridian/internal/kubeenv"
)

// KubeVersion is the Kubernetes release whose kube-apiserver the tests run; hack/kubetools
// builds exactly this one.
const KubeVersion = kubeenv.KubeVersion

// Env is a running API server shared by the tests of one test binary.
type Env struct {
	Config  *rest.Config
	Client  kubernetes.Interface
	Dynamic dynamic.Interface
	APIExt  apiextclient.Interface

	env *kubeenv.Env
}

var (
	mu      sync.Mutex
	shared  *Env
	failure error
	nsSeq   atomic.Int64
	// gated are the API servers started with feature gates (StartWith), by gates.
	gated map[string]*Env
)

// Options start an API server other than the shared default one.
type Options struct {
	// FeatureGates is the API server's --feature-gates ("ShardedListAndWatch=true").
	FeatureGates string
}

// StartWith is Start for an API server started with opts: one per distinct opts in the test
// binary, shared by the tests that ask for the same, stopped by Main. The zero Options are
// Start's server.
func StartWith(t testing.TB, opts Options) *Env {
	t.Helper()
	if opts.FeatureGates == "" {
		return Start(t)
	}
	SkipUnlessAvailable(t)
	mu.Lock()
	defer mu.Unlock()
	if e := gated[opts.FeatureGates]; e != nil {
		return e
	}
	e, err := start(opts)
	if err != nil {
		t.Fatalf("start API server with --feature-gates=%s: %v", opts.FeatureGates, err)
	}
	if gated == nil {
		gated = map[string]*Env{}
	}
	gated[opts.FeatureGates] = e
	return e
}

// RepoRoot returns the repository root (the directory holding go.mod), found from this file.
func RepoRoot() string { return kubeenv.RepoRoot() }

// AssetsDir returns the directory expected to hold kube-apiserver and etcd:
// $KUBEBUILDER_ASSETS when set, else .cache/kube/<KubeVersion>/bin in the repository.
func AssetsDir() string {
	if d := os.Getenv(kubeenv.AssetsEnv); d != "" {
		return d
	}
	return filepath.Join(RepoRoot(), ".cache", "kube", KubeVersion, "bin")
}

// Available reports whether the API server binaries exist, and if not, why.
func Available() (bool, string) {
	if err := kubeenv.CheckAssets(AssetsDir()); err != nil {
		return false, err.Error()
	}
	return true, ""
}

// SkipUnlessAvailable skips t when the API server binaries are absent, or fails it when
// Required: for a test that starts an API server of its own from AssetsDir.
func SkipUnlessAvailable(t testing.TB) {
	t.Helper()
	if ok, why := Available(); !ok {
		if Required() {
			t.Fatalf("MERIDIAN_REQUIRE_KUBE is set but %s", why)
		}
		t.Skip(why)
	}
}

// Required reports whether MERIDIAN_REQUIRE_KUBE is set (to anything but "", "0" or "false"):
// CI sets it so that absent binaries fail the tests instead of skipping them.
func Required() bool {
	switch os.Getenv("MERIDIAN_REQUIRE_KUBE") {
	case "", "0", "false":
		return false
	}
	return true
}

// Start returns the test binary's shared API server, starting it on first use with the
// repository's CRDs (the Helm chart's deploy/charts/meridian/crds) installed. It skips t when the binaries are absent (fails it
// when Required) and fails t when the server cannot start. Call Main from TestMain so the
// server is stopped at exit.
func Start(t testing.TB) *Env {
	t.Helper()
	SkipUnlessAvailable(t)
	mu.Lock()
	defer mu.Unlock()
	if failure != nil {
		t.Fatalf("API server failed to start earlier: %v", failure)
	}
	if shared != nil {
		return shared
	}
	e, err := start(Options{})
	if err != nil {
		failure = err
		t.Fatalf("start API server: %v", err)
	}
	shared = e
	return shared
}

func start(opts Options) (_ *Env, err error) {
	// kubeenv keeps the API server's directory (serving certificate, its CA, the
	// ServiceAccount signing key) across Restart: clients keep trusting the server and
	// ServiceAccount tokens issued before a restart stay valid.
	cfg := kubeenv.Config{AssetsDir: AssetsDir(), StartTimeout: 2 * time.Minute, StopTimeout: time.Minute, FeatureGates: opts.FeatureGates}
	crds := filepath.Join(RepoRoot(), "deploy", "charts", "meridian", "crds")
	if _, err := os.Stat(crds); err == nil {
		cfg.CRDs = os.DirFS(crds)
	}
	if v, _ := strconv.ParseBool(os.Getenv("KUBEBUILDER_ATTACH_CONTROL_PLANE_OUTPUT")); v {
		cfg.Output = os.Stderr
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ke, err := kubeenv.Start(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = ke.Stop()
		}
	}()
	rc := rest.CopyConfig(ke.Config)
	rc.QPS, rc.Burst = 1000, 2000
	e := &Env{Config: rc, env: ke}
	if e.Client, err = kubernetes.NewForConfig(rc); err != nil {
		return nil, err
	}
	if e.Dynamic, err = dynamic.NewForConfig(rc); err != nil {
		return nil, err
	}
	if e.APIExt, err = apiextclient.NewForConfig(rc); err != nil {
		return nil, err
	}
	return e, nil
}

// Main runs the package's tests and then stops the shared API server, if one was started.
// Use it as: func TestMain(m *testing.M) { os.Exit(kubetest.Main(m)) }.
func Main(m *testing.M) int {
	code := m.Run()
	mu.Lock()
	defer mu.Unlock()
	if shared != nil {
		if err := shared.env.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "kubetest: stop API server: %v\n", err)
		}
		shared = nil
	}
	for gates, e := range gated {
		if err := e.env.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "kubetest: stop API server (--feature-gates=%s): %v\n", gates, err)
		}
	}
	gated = nil
	return code
}

// Namespace creates a fresh namespace with the given labels for one test and deletes it when
// the test ends (namespaces are never reused, so tests sharing one server do not see each
// other's objects).
func (e *Env) Namespace(t testing.TB, labels map[string]string) string {
	t.Helper()
	name := fmt.Sprintf("t%d-%d", time.Now().UnixNano()%1_000_000, nsSeq.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := e.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = e.Client.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{})
	})
	return name
}

// Restart stops the API server (etcd keeps its data) and starts it again on the same address
// with the same certificates and ServiceAccount signing key, cutting every open watch, so that
// tests can prove informers resynchronise. Existing clients and Config stay valid. The server
// is shared by the whole test binary: a test that restarts it must not run in parallel with
// tests that would be disturbed by the outage.
func (e *Env) Restart(t testing.TB) {
	t.Helper()
	mu.Lock()
	defer mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := e.env.RestartAPIServer(ctx); err != nil {
		failure = err // later Start calls fail fast instead of hanging
		t.Fatalf("restart API server: %v", err)
	}
}

// HelmPath returns the helm binary built by `make kube-bin` next to the API server binaries.
// Like Start, it skips t when helm is absent, or fails it when Required.
func HelmPath(t testing.TB) string {
	t.Helper()
	p := filepath.Join(AssetsDir(), "helm")
	if _, err := os.Stat(p); err != nil {
		why := fmt.Sprintf("helm not found in %s; run `make kube-bin` to build it (make test does)", AssetsDir())
		if Required() {
			t.Fatalf("MERIDIAN_REQUIRE_KUBE is set but %s", why)
		}
		t.Skip(why)
	}
	return p
}
