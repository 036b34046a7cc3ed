package main

import (
	"bytes"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/meridian-mesh/meridian/internal/testutil"
)

// capture runs the command line with stdout and stderr captured.
func capture(t *testing.T, args ...string) (code int, out, errOut string) {
	t.Helper()
	var o, e bytes.Buffer
	oldOut, oldErr := stdout, stderr
	stdout, stderr = &o, &e
	defer func() { stdout, stderr = oldOut, oldErr }()
	code = runMain(args)
	return code, o.String(), e.String()
}

func TestHelpExitsZeroForEveryCommand(t *testing.T) {
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		for _, h := range []string{"-h", "--help"} {
			code, out, errOut := capture(t, n, h)
			if code != 0 || !strings.Contains(out, "usage: meridian "+n) {
				t.Errorf("meridian %s %s = exit %d, stdout %q, stderr %q; want exit 0 and the usage", n, h, code, out, errOut)
			}
		}
	}
	if code, out, _ := capture(t, "help"); code != 0 || !strings.Contains(out, "commands:") {
		t.Errorf("meridian help = %d %q", code, out)
	}
	if code, _, errOut := capture(t); code != 2 || !strings.Contains(errOut, "commands:") {
		t.Errorf("meridian (no command) = %d %q, want 2 and the usage on stderr", code, errOut)
	}
	if code, _, errOut := capture(t, "destination", "--no-such-flag"); code != 2 || !strings.Contains(errOut, "-no-such-flag") || !strings.Contains(errOut, "meridian destination -h") {
		t.Errorf("a bad flag = %d %q, want 2 naming the flag and pointing at -h", code, errOut)
	}
}

// kubeServer is the API server of the tests' kubeconfigs: nothing listens there.
const kubeServer = "https://127.0.0.1:1"

// TestEveryCommandFindsTheAPIServerTheSameWay runs each command that talks to Kubernetes in
// the situations where the lookup order matters, and checks that each one took the same
// source: --kubeconfig, then $KUBECONFIG, then in-cluster, then ~/.kube/config.
func TestEveryCommandFindsTheAPIServerTheSameWay(t *testing.T) {
	cmds := map[string][]string{
		"destination": {"destination", "--source", "kubernetes", "--addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--plaintext"},
		"policy":      {"policy", "--grpc-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--plaintext"},
		"identity":    {"identity", "--addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0"},
		"injector":    {"injector", "--addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0"},
		"check":       {"check"},
	}
	home := t.TempDir()
	homeConfig := filepath.Join(home, ".kube", "config")
	testutil.WriteKubeconfig(t, homeConfig, kubeServer)
	missingFlag := filepath.Join(t.TempDir(), "flag-config")
	missingEnv := filepath.Join(t.TempDir(), "env-config")
	cases := []struct {
		name      string
		extra     []string
		env       map[string]string
		wantInErr string
	}{
		{"nothing configured", nil, map[string]string{"HOME": t.TempDir()}, "no Kubernetes configuration: pass --kubeconfig, set KUBECONFIG"},
		{"--kubeconfig wins over $KUBECONFIG", []string{"--kubeconfig", missingFlag}, map[string]string{"KUBECONFIG": missingEnv}, missingFlag},
		{"$KUBECONFIG wins over in-cluster", nil, map[string]string{"KUBECONFIG": missingEnv, "KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": "1"}, missingEnv},
		{"in-cluster wins over ~/.kube/config", nil, map[string]string{"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": "1"}, "in-cluster config"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("HOME", home)
			t.Setenv("KUBECONFIG", "")
			t.Setenv("KUBERNETES_SERVICE_HOST", "")
			t.Setenv("KUBERNETES_SERVICE_PORT", "")
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			for name, args := range cmds {
				code, _, errOut := capture(t, append(append([]string{}, args...), c.extra...)...)
				if code != 1 || !strings.Contains(errOut, c.wantInErr) {
					t.Errorf("%s: exit %d, stderr %q; want exit 1 and %q", name, code, errOut, c.wantInErr)
				}
			}
		})
	}
}

func TestMain(m *testing.M) { os.Exit(testutil.Main(m, nil)) }
