package kubeenv

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
)

// KubeVersion is the Kubernetes release whose kube-apiserver and etcd `make kube-bin` builds
// (hack/kubetools builds exactly this one; hack/kube-bin.sh checks that they agree).
const KubeVersion = "v1.37.2"

// AssetsEnv names the environment variable that overrides DefaultAssetsDir (envtest's name
// for it, which the tests have always used).
const AssetsEnv = "KUBEBUILDER_ASSETS"

// RepoRoot returns the root of the source tree this package was built from (the directory
// holding go.mod), found from this file's path at build time. A binary run away from its
// source tree gets a path that may not exist.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// DefaultAssetsDir returns the directory expected to hold kube-apiserver and etcd:
// $KUBEBUILDER_ASSETS when set, else .cache/kube/<KubeVersion>/bin in the source tree (RepoRoot),
// else the same path under the working directory.
func DefaultAssetsDir() string {
	if d := os.Getenv(AssetsEnv); d != "" {
		return d
	}
	rel := filepath.Join(".cache", "kube", KubeVersion, "bin")
	if d := filepath.Join(RepoRoot(), rel); dirExists(d) {
		return d
	}
	if wd, err := os.Getwd(); err == nil {
		if d := filepath.Join(wd, rel); dirExists(d) {
			return d
		}
	}
	return filepath.Join(RepoRoot(), rel)
}

func dirExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

// CheckAssets reports, as an error saying how to build them, that dir lacks kube-apiserver
// or etcd.
func CheckAssets(dir string) error {
	for _, b := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			return fmt.Errorf("real API server binaries not found in %s (%s missing); run `make kube-bin` to build them (make test does), or set %s", dir, b, AssetsEnv)
		}
	}
	return nil
}
