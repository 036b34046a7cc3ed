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

	env *envtest.Environment
}

var (
	mu      sync.Mutex
	shared  *Env
	failure error
	nsSeq   atomic.Int64
)

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

// Start returns the test binary's shared API server, starting it on first use with the
// repository's CRDs (deploy/crds) installed. It skips t when the binaries are absent and fails
// t when the server cannot start. Call Main from TestMain so the server is stopped at exit.
func Start(t testing.TB) *Env {
	t.Helper()
	if ok, why := Available(); !ok {
		if os.Getenv("MERIDIAN_REQUIRE_KUBE") != "" {
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
	e, err := start()
	if err != nil {
		failure = err
		t.Fatalf("start API server: %v", err)
	}
	shared = e
	return shared
}

func start() (*Env, error) {
	te := &envtest.Environment{
		BinaryAssetsDirectory:    AssetsDir(),
		ErrorIfCRDPathMissing:    false,
		ControlPlaneStartTimeout: 2 * time.Minute,
		ControlPlaneStopTimeout:  time.Minute,
	}
	crds := filepath.Join(RepoRoot(), "deploy", "crds")
	if _, err := os.Stat(crds); err == nil {
		te.CRDDirectoryPaths = []string{crds}
		te.ErrorIfCRDPathMissing = true
	}
	api := te.ControlPlane.GetAPIServer()
	api.Configure().
		Set("advertise-address", "127.0.0.1").
		Set("endpoint-reconciler-type", "none")
	cfg, err := te.Start()
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = 1000, 2000
	e := &Env{Config: cfg, env: te}
	if e.Client, err = kubernetes.NewForConfig(cfg); err != nil {
		_ = te.Stop()
		return nil, err
	}
	if e.Dynamic, err = dynamic.NewForConfig(cfg); err != nil {
		_ = te.Stop()
		return nil, err
	}
	if e.APIExt, err = apiextclient.NewForConfig(cfg); err != nil {
		_ = te.Stop()
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

// Restart stops the API server (etcd keeps its data) and starts it again on the same
// address, cutting every open watch, so that tests can prove informers resynchronise.
func (e *Env) Restart(t testing.TB) {
	t.Helper()
	api := e.env.ControlPlane.GetAPIServer()
	if err := api.Stop(); err != nil {
		t.Fatalf("stop API server: %v", err)
	}
	if err := api.Start(); err != nil {
		t.Fatalf("restart API server: %v", err)
	}
}
