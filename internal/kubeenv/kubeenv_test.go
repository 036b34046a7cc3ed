package kubeenv_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/meridian-mesh/meridian/internal/kubeenv"
	"github.com/meridian-mesh/meridian/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.Main(m, nil)) }

// assets returns the binaries' directory, skipping t when they are absent (failing it when
// MERIDIAN_REQUIRE_KUBE is set).
func assets(t *testing.T) string {
	t.Helper()
	dir := kubeenv.DefaultAssetsDir()
	if err := kubeenv.CheckAssets(dir); err != nil {
		if v := os.Getenv("MERIDIAN_REQUIRE_KUBE"); v != "" && v != "0" && v != "false" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	return dir
}

// Another process reads the API server through the kubeconfig Start's Env writes; Stop ends
// both processes and removes the directory, and a second Stop does nothing.
func TestStartKubeconfigStop(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	env, err := kubeenv.Start(ctx, kubeenv.Config{AssetsDir: assets(t), ServiceCIDRs: "172.16.0.0/12"})
	if err != nil {
		t.Fatal(err)
	}
	defer env.Stop()
	api, etcd := env.PIDs()
	if api <= 0 || etcd <= 0 || api == etcd {
		t.Errorf("PIDs %d, %d", api, etcd)
	}
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := env.WriteKubeconfig(kc); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(kc); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("kubeconfig %v, %v: want mode 0600", st, err)
	}
	rc, err := clientcmd.BuildConfigFromFlags("", kc)
	if err != nil {
		t.Fatal(err)
	}
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); err != nil {
		t.Fatalf("through the kubeconfig: %v", err)
	}
	dir := env.Dir()
	if err := env.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("%s still there after Stop: %v", dir, err)
	}
	if err := env.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
}

func TestStartRefusesBadConfig(t *testing.T) {
	ctx := context.Background()
	_, err := kubeenv.Start(ctx, kubeenv.Config{AssetsDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "make kube-bin") {
		t.Errorf("no binaries: %v", err)
	}
	for _, gates := range []string{"NoValue", "=true", "A=maybe", "A=true,,B=false"} {
		_, err := kubeenv.Start(ctx, kubeenv.Config{AssetsDir: assets(t), FeatureGates: gates})
		if err == nil || !strings.Contains(err.Error(), "feature gates") {
			t.Errorf("feature gates %q: %v", gates, err)
		}
	}
}
