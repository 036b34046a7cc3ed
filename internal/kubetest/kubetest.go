package kubetest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
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
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// KubeVersion is the Kubernetes release whose kube-apiserver the tests run; hack/kubetools
// builds exactly this one.
const KubeVersion = "v1.37.2"

// Env is a running API server shared by the tests of one test binary.
type Env struct {
	Config  *rest.Config
	Client  kubernetes.Interface
	Dynamic dynamic.Interface
	APIExt  apiextclient.Interface

	env     *envtest.Environment
	certDir string
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
	if ok, why := Available(); !ok {
		if Required() {
			t.Fatalf("MERIDIAN_REQUIRE_KUBE is set but %s", why)
		}
		t.Skip(why)
	}
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
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// AssetsDir returns the directory expected to hold kube-apiserver and etcd:
// $KUBEBUILDER_ASSETS when set, else .cache/kube/<KubeVersion>/bin in the repository.
func AssetsDir() string {
	if d := os.Getenv("KUBEBUILDER_ASSETS"); d != "" {
		return d
	}
	return filepath.Join(RepoRoot(), ".cache", "kube", KubeVersion, "bin")
}

// Available reports whether the API server binaries exist, and if not, why.
func Available() (bool, string) {
	dir := AssetsDir()
	for _, b := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			return false, fmt.Sprintf("real API server binaries not found in %s (%s missing); run `make kube-bin` to build them (make test does)", dir, b)
		}
	}
	return true, ""
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
	if ok, why := Available(); !ok {
		if Required() {
			t.Fatalf("MERIDIAN_REQUIRE_KUBE is set but %s", why)
		}
		t.Skip(why)
	}
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
	// The API server's directory (serving certificate, its CA, the ServiceAccount signing key)
	// is ours rather than envtest's throwaway one, so that Restart keeps it: clients keep
	// trusting the server and ServiceAccount tokens issued before a restart stay valid.
	certDir, err := os.MkdirTemp("", "kubetest-apiserver-")
	if err != nil {
		return nil, err
	}
	te := &envtest.Environment{
		BinaryAssetsDirectory:    AssetsDir(),
		ErrorIfCRDPathMissing:    false,
		ControlPlaneStartTimeout: 2 * time.Minute,
		ControlPlaneStopTimeout:  time.Minute,
	}
	defer func() {
		if err != nil {
			// Start may fail after etcd or the API server is up (CRD install): stop them.
			_ = te.Stop()
			_ = os.RemoveAll(certDir)
		}
	}()
	crds := filepath.Join(RepoRoot(), "deploy", "charts", "meridian", "crds")
	if _, err := os.Stat(crds); err == nil {
		te.CRDDirectoryPaths = []string{crds}
		te.ErrorIfCRDPathMissing = true
	}
	api := te.ControlPlane.GetAPIServer()
	api.CertDir = certDir
	api.Configure().
		Set("advertise-address", "127.0.0.1").
		Set("endpoint-reconciler-type", "none").
		// On SIGTERM, drain ordinary requests, then give open watches 2 s (not the default
		// request timeout, 60 s, which an informer's watch always uses up) to see GOAWAY.
		Set("shutdown-send-retry-after", "true")
	if opts.FeatureGates != "" {
		api.Configure().Set("feature-gates", opts.FeatureGates)
	}
	cfg, err := te.Start()
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = 1000, 2000
	e := &Env{Config: cfg, env: te, certDir: certDir}
	if e.Client, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, err
	}
	if e.Dynamic, err = dynamic.NewForConfig(cfg); err != nil {
		return nil, err
	}
	if e.APIExt, err = apiextclient.NewForConfig(cfg); err != nil {
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
		_ = os.RemoveAll(shared.certDir)
		shared = nil
	}
	for gates, e := range gated {
		if err := e.env.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "kubetest: stop API server (--feature-gates=%s): %v\n", gates, err)
		}
		_ = os.RemoveAll(e.certDir)
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
	api := e.env.ControlPlane.GetAPIServer()
	if err := api.Stop(); err != nil {
		failure = fmt.Errorf("restart: stop: %w", err)
		t.Fatalf("stop API server: %v", err)
	}
	if err := api.Start(); err != nil {
		failure = fmt.Errorf("restart: %w", err) // later Start calls fail fast instead of hanging
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
