package kube

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meridian-mesh/meridian/internal/testutil"
)

// writeKubeconfig writes a kubeconfig for https://host:6443 (token abc) and returns its path.
func writeKubeconfig(t *testing.T, host string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config")
	testutil.WriteKubeconfig(t, p, "https://"+host+":6443")
	return p
}

func TestRESTConfig(t *testing.T) {
	// No in-cluster environment, and a home without ~/.kube.
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBERNETES_SERVICE_PORT", "")
	t.Setenv("HOME", t.TempDir())
	t.Setenv("KUBECONFIG", "")

	flag := writeKubeconfig(t, "from-flag.example")
	envFile := writeKubeconfig(t, "from-env.example")

	if _, err := RESTConfig(""); err == nil || !strings.Contains(err.Error(), "--kubeconfig") {
		t.Errorf("RESTConfig with nothing configured = %v, want an error naming --kubeconfig", err)
	}

	t.Setenv("KUBECONFIG", envFile)
	cfg, err := RESTConfig("")
	if err != nil || cfg.Host != "https://from-env.example:6443" {
		t.Errorf("from KUBECONFIG: %v, %v", cfg, err)
	}
	cfg, err = RESTConfig(flag)
	if err != nil || cfg.Host != "https://from-flag.example:6443" || cfg.BearerToken != "abc" {
		t.Errorf("from the flag (which wins over KUBECONFIG): %v, %v", cfg, err)
	}
	missing := filepath.Join(t.TempDir(), "nope")
	if _, err := RESTConfig(missing); err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("missing kubeconfig = %v, want an error naming it", err)
	}

	t.Setenv("KUBECONFIG", "")
	home := t.TempDir()
	t.Setenv("HOME", home)
	if err := os.MkdirAll(filepath.Join(home, ".kube"), 0o755); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(envFile)
	if err := os.WriteFile(filepath.Join(home, ".kube", "config"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	if cfg, err := RESTConfig(""); err != nil || cfg.Host != "https://from-env.example:6443" {
		t.Errorf("from ~/.kube/config: %v, %v", cfg, err)
	}
}
