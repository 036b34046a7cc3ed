package charttest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/meridian-mesh/meridian/internal/chart"
	"github.com/meridian-mesh/meridian/internal/kubetest"
)

// Main is TestMain's run func for packages that use the stand-in kubelet:
//
//	func TestMain(m *testing.M) { os.Exit(testutil.Main(m, charttest.Main)) }
//
// When the binary was started as a pod's init (see Kubelet) it sets the pod up and becomes
// the container's process instead of running tests. Otherwise it runs the tests with
// kubetest.Main and removes the meridian binary Binary built.
func Main(m *testing.M) int {
	if spec := os.Getenv(podSpecEnv); spec != "" {
		runPodInit(spec) // never returns
	}
	code := kubetest.Main(m)
	build.mu.Lock()
	if build.dir != "" {
		_ = os.RemoveAll(build.dir)
	}
	build.mu.Unlock()
	return code
}

var build struct {
	mu        sync.Mutex
	dir, path string
	err       error
}

// Binary builds ./cmd/meridian once per test binary, with its version set to the chart's
// appVersion (so that `meridian check` finds the CLI and the control plane at one version),
// into a directory every user may read (pods run as their runAsUser), and returns its path.
func Binary(t testing.TB) string {
	t.Helper()
	build.mu.Lock()
	defer build.mu.Unlock()
	if build.path == "" && build.err == nil {
		build.path, build.err = buildBinary()
	}
	if build.err != nil {
		t.Fatalf("build meridian: %v", build.err)
	}
	return build.path
}

func buildBinary() (string, error) {
	v, err := chart.AppVersion()
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "charttest-bin-")
	if err != nil {
		return "", err
	}
	build.dir = dir
	if err := os.Chmod(dir, 0o755); err != nil {
		return "", err
	}
	out := filepath.Join(dir, "meridian")
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-ldflags", "-X main.version="+v, "-o", out, "./cmd/meridian")
	cmd.Dir = kubetest.RepoRoot()
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/meridian: %v\n%s", err, b)
	}
	return out, nil
}

// WriteKubeconfig writes a kubeconfig for cfg (the test's admin credentials) into dir and
// returns its path, for helm and `meridian check`.
func WriteKubeconfig(t testing.TB, cfg *rest.Config, dir string) string {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{
		ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken,
	}
	kc.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "admin"}
	kc.CurrentContext = "envtest"
	path := filepath.Join(dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatalf("write kubeconfig: %v", err)
	}
	return path
}

// ChartDir is the chart's directory in the repository.
func ChartDir() string { return filepath.Join(kubetest.RepoRoot(), "deploy", "charts", "meridian") }

// Helm runs the helm binary of kubetest.HelmPath with args, its caches and configuration in
// dir and kubeconfig (may be "") as its cluster, within 2 minutes; it returns stdout and the
// error with stderr.
func Helm(t testing.TB, dir, kubeconfig string, args ...string) (string, error) {
	t.Helper()
	helm := kubetest.HelmPath(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if kubeconfig != "" {
		args = append(args, "--kubeconfig", kubeconfig)
	}
	cmd := exec.CommandContext(ctx, helm, args...)
	cmd.Env = append(os.Environ(),
		"HELM_CACHE_HOME="+filepath.Join(dir, "helm-cache"),
		"HELM_CONFIG_HOME="+filepath.Join(dir, "helm-config"),
		"HELM_DATA_HOME="+filepath.Join(dir, "helm-data"),
	)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("helm %v: %v: %s%s", args[0], err, stdout.String(), stderr.String())
	}
	return stdout.String(), nil
}
