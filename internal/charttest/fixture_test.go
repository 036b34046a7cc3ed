package charttest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meridian-mesh/meridian/internal/charttest"
	"github.com/meridian-mesh/meridian/internal/check"
	"github.com/meridian-mesh/meridian/internal/kubetest"
	"github.com/meridian-mesh/meridian/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.Main(m, charttest.Main)) }

// fixture is one fresh control-plane namespace on the shared API server, with a kubeconfig
// for helm and meridian, and identity values from `meridian identity init`.
type fixture struct {
	env        *kubetest.Env
	ns, dir    string
	kubeconfig string
	bin        string
	identity   string // the values file
	anchorKey  string // the trust anchor's key, to sign other issuers
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	env := kubetest.Start(t)
	kubetest.HelmPath(t)
	f := &fixture{env: env, ns: env.Namespace(t, nil), dir: t.TempDir(), bin: charttest.Binary(t)}
	f.kubeconfig = charttest.WriteKubeconfig(t, env.Config, f.dir)
	f.identity, f.anchorKey = filepath.Join(f.dir, "identity.yaml"), filepath.Join(f.dir, "anchor.key")
	f.meridian(t, 0, "identity", "init", "--control-plane-namespace", f.ns, "--values-out", f.identity, "--anchor-key-out", f.anchorKey)
	// The stand-in's pods share the host's network namespace: the plaintext listeners the
	// chart puts on 127.0.0.1 in each destination and policy pod (for kubectl port-forward)
	// would collide. Every install and upgrade passes this file.
	vals, err := os.OpenFile(f.identity, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer vals.Close()
	if _, err := vals.WriteString("\ncontrolPlaneTLS:\n  localListeners: false\n"); err != nil {
		t.Fatal(err)
	}
	return f
}

// meridian runs the built binary and returns its stdout; it fails t unless it exits with code.
func (f *fixture) meridian(t *testing.T, code int, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, f.bin, args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if got := cmd.ProcessState.ExitCode(); got != code {
		t.Fatalf("meridian %s: exit %d (%v), want %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), got, err, code, out.String(), errOut.String())
	}
	return out.String()
}

// helm runs helm against the fixture's cluster.
func (f *fixture) helm(t *testing.T, args ...string) string {
	t.Helper()
	out, err := charttest.Helm(t, f.dir, f.kubeconfig, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// install helm-installs the chart as release "meridian" into the fixture's namespace and
// uninstalls it (its cluster-scoped objects too) when t ends.
func (f *fixture) install(t *testing.T, args ...string) {
	t.Helper()
	f.helm(t, append([]string{"install", "meridian", charttest.ChartDir(), "-n", f.ns, "-f", f.identity}, args...)...)
	t.Cleanup(func() {
		if _, err := charttest.Helm(t, f.dir, f.kubeconfig, "uninstall", "meridian", "-n", f.ns); err != nil {
			t.Errorf("helm uninstall: %v", err)
		}
	})
}

// secret returns the Secret name of the fixture's namespace.
func (f *fixture) secret(ctx context.Context, t *testing.T, name string) *corev1.Secret {
	t.Helper()
	s, err := f.env.Client.CoreV1().Secrets(f.ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// editSecret changes the Secret name of the fixture's namespace with edit, as kubectl edit
// would.
func (f *fixture) editSecret(ctx context.Context, t *testing.T, name string, edit func(*corev1.Secret)) {
	t.Helper()
	if err := editObject(ctx, f.env.Client.CoreV1().Secrets(f.ns), name, edit); err != nil {
		t.Fatal(err)
	}
}

// getUpdater is a typed client of one kind of object (Secrets, MutatingWebhookConfigurations).
type getUpdater[T any] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error)
}

// editObject reads the object name through c, changes it with edit and writes it back.
func editObject[T any](ctx context.Context, c getUpdater[T], name string, edit func(T)) error {
	o, err := c.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	edit(o)
	_, err = c.Update(ctx, o, metav1.UpdateOptions{})
	return err
}

// replaceObject changes the object name through c with set, which returns how to undo the
// change on a copy read later; it returns a func that undoes it (failing t with an error
// naming what when it cannot, without stopping it).
func replaceObject[T any](t *testing.T, c getUpdater[T], name, what string, set func(T) (undo func(T))) func() {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var undo func(T)
	if err := editObject(ctx, c, name, func(o T) { undo = set(o) }); err != nil {
		t.Fatal(err)
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := editObject(ctx, c, name, undo); err != nil {
			t.Errorf("restore %s: %v", what, err)
		}
	}
}

// check runs `meridian check -o json` and returns its report and whether it exited 0.
func (f *fixture) check(t *testing.T) (check.Report, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, f.bin, "check", "--kubeconfig", f.kubeconfig, "--namespace", f.ns, "-o", "json")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var rep check.Report
	if jerr := json.Unmarshal(out.Bytes(), &rep); jerr != nil {
		t.Fatalf("meridian check: %v (exit %v): stdout %q stderr %q", jerr, err, out.String(), errOut.String())
	}
	if (err == nil) != rep.OK {
		t.Fatalf("meridian check exited with %v but reports success=%v", err, rep.OK)
	}
	return rep, err == nil
}

// failedChecks returns the names of failed checks, each with its message and details.
func failedChecks(rep check.Report) map[string]string {
	out := map[string]string{}
	for _, r := range rep.Failed() {
		out[r.Name] = r.Message + "; " + strings.Join(r.Details, "; ")
	}
	return out
}

// ringOf fetches a destination replica's /ring.
func ringOf(ip string) (members []string, services map[string]int, total int, err error) {
	resp, err := http.Get("http://" + ip + ":9996/ring")
	if err != nil {
		return nil, nil, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, nil, 0, fmt.Errorf("/ring: %s", resp.Status)
	}
	var st struct {
		Services int `json:"services"`
		Members  []struct {
			Name     string `json:"name"`
			Services int    `json:"services"`
		} `json:"members"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return nil, nil, 0, err
	}
	services = map[string]int{}
	for _, m := range st.Members {
		members = append(members, m.Name)
		services[m.Name] = m.Services
	}
	return members, services, st.Services, nil
}
