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
// kubetest.Main and removes the binaries Binary and ProxyBinary built.
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
	mu    sync.Mutex
	dir   string
	paths map[string]string // by package: ./cmd/meridian, ./cmd/meridian-proxy
	err   error
}

// Binary builds ./cmd/meridian once per test binary, with its version set to the chart's
// appVersion (so that `meridian check` finds the CLI and the control plane at one version),
// into a directory every user may read (pods run as their runAsUser), and returns its path.
func Binary(t testing.TB) string { return built(t, "./cmd/meridian") }

// ProxyBinary builds ./cmd/meridian-proxy, the proxy built alone that injected pods run
// (Config.ProxyBinary), as Binary builds meridian (into the same directory), and returns its
// path.
func ProxyBinary(t testing.TB) string { return built(t, "./cmd/meridian-proxy") }

// built returns the binary of the main package pkg, building it on first use; a failed
// build fails every later call too.
func built(t testing.TB, pkg string) string {
	t.Helper()
	build.mu.Lock()
	defer build.mu.Unlock()
	if build.err == nil && build.paths[pkg] == "" {
		var path string
		if path, build.err = buildBinary(pkg); build.err == nil {
			if build.paths == nil {
				build.paths = map[string]string{}
			}
			build.paths[pkg] = path
		}
	}
	if build.err != nil {
		t.Fatalf("build %s: %v", pkg, build.err)
	}
	return build.paths[pkg]
}

// buildBinary builds pkg into build.dir (made on first use), named after the package.
func buildBinary(pkg string) (string, error) {
	v, err := chart.AppVersion()
	if err != nil {
		return "", err
	}
	if build.dir == "" {
		dir, err := os.MkdirTemp("", "charttest-bin-")
		if err != nil {
			return "", err
		}
		build.dir = dir
		if err := os.Chmod(dir, 0o755); err != nil {
			return "", err
		}
	}
	out := filepath.Join(build.dir, filepath.Base(pkg))
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	// -X of a variable the package lacks (meridian-proxy has no version) does nothing.
	cmd := exec.CommandContext(ctx, "go", "build", "-ldflags", "-X main.version="+v, "-o", out, pkg)
	cmd.Dir = kubetest.RepoRoot()
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %v\n%s", pkg, err, b)
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
