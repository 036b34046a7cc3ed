package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

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
	// A command's own usage text (its arguments, what it does) is what -h prints.
	for cmd, want := range map[string]string{
		"endpoints": "usage: meridian endpoints [flags] <service>.<namespace>.svc.<cluster-domain>[:port] ...",
		"inject":    "Reads Kubernetes manifests",
		"identity":  "meridian identity {init|token|certify} [flags]",
		"demo":      "meridian demo {app|traffic} [flags]",
		"bench":     "meridian bench {proxy} [flags]",
	} {
		if code, out, _ := capture(t, cmd, "-h"); code != 0 || !strings.Contains(out, want) || !strings.Contains(out, "-") {
			t.Errorf("meridian %s -h = exit %d, stdout %q; want its usage text %q and its flags", cmd, code, out, want)
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

// TestEndpointsUsageErrors: what `meridian endpoints` cannot do is a usage error (exit 2)
// saying why, before it connects anywhere.
func TestEndpointsUsageErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "no authority given: meridian endpoints [flags] <service>"},
		{[]string{"--watch", "a.ns.svc.cluster.local", "b.ns.svc.cluster.local"}, "--watch follows one authority, not 2"},
		{[]string{"--timeout", "0s", "a.ns.svc.cluster.local"}, "--timeout 0s: want a positive duration"},
		{[]string{"--timeout", "-1s", "a.ns.svc.cluster.local"}, "--timeout -1s: want a positive duration"},
	} {
		code, _, errOut := capture(t, append([]string{"endpoints", "--addr", "127.0.0.1:1"}, c.args...)...)
		if code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("meridian endpoints %q = exit %d, stderr %q; want 2 and %q", c.args, code, errOut, c.want)
		}
	}
}

// TestDemoUsageErrors: a demo that could not send its traffic is refused before anything
// starts.
func TestDemoUsageErrors(t *testing.T) {
	for _, rate := range []string{"0", "-1", "NaN", "1e9"} {
		code, _, errOut := capture(t, "demo", "--cache-dir", t.TempDir(), "--rate", rate)
		if code != 2 || !strings.Contains(errOut, "--rate") {
			t.Errorf("meridian demo --rate %s = exit %d, stderr %q; want 2 naming --rate", rate, code, errOut)
		}
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

func TestMain(m *testing.M) {
	if os.Getenv(drainTestEnv) != "" {
		os.Exit(drainTestMain())
	}
	os.Exit(testutil.Main(m, nil))
}

// TestSecondSignalEndsTheDrain: the first SIGINT stops a command gracefully, and it may then
// drain for long (a server's --shutdown-grace); a second one ends the process at once. The
// second used to be caught and ignored until the drain was over. The process is this test
// binary, running a command that drains for 2 minutes (drainTestEnv).
func TestSecondSignalEndsTheDrain(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), drainTestEnv+"=1")
	stderrPipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	lines := make(chan string, 16)
	var wg sync.WaitGroup
	wg.Go(func() {
		sc := bufio.NewScanner(stderrPipe)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default:
			}
		}
		exited <- cmd.Wait()
	})
	t.Cleanup(func() { _ = cmd.Process.Kill(); wg.Wait() })
	for line := ""; line != "running"; {
		line = testutil.Recv(t, lines, 30*time.Second, "the command to run")
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	for line := ""; !strings.Contains(line, "stopping; a second interrupt ends it at once"); {
		line = testutil.Recv(t, lines, 30*time.Second, "the process to say it is stopping")
	}
	testutil.Never(t, 300*time.Millisecond, "the process to exit while it drains", func() bool { return len(exited) > 0 })
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	err = testutil.Recv(t, exited, 30*time.Second, "the process to end after the second interrupt")
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != -1 {
		t.Fatalf("the process ended with %v, want killed by the second interrupt", err)
	}
}

// drainTestEnv, set, makes this test binary run `meridian drain-test` instead of its tests: a
// command that says "running" on stderr and, once its context ends, drains for 2 minutes.
const drainTestEnv = "MERIDIAN_DRAIN_TEST"

func drainTestMain() int {
	register(&command{name: "drain-test", summary: "test only", run: func(ctx context.Context, _ []string) error {
		fmt.Fprintln(stderr, "running")
		<-ctx.Done()
		<-time.After(2 * time.Minute) // the drain
		return nil
	}})
	return runMain([]string{"drain-test"})
}

// TestRefusedFlagValuesAreUsageErrors: a flag value a command refuses is a usage error (exit
// 2, one line naming it) found before anything starts, as a flag that does not parse is.
func TestRefusedFlagValuesAreUsageErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"destination", "--source", "dir:" + t.TempDir(), "--plaintext", "--stream-queue-capacity", "0"}, "--stream-queue-capacity must be at least 1"},
		{[]string{"policy", "--source", "dir:" + t.TempDir(), "--plaintext", "--cluster-default-policy", "open"}, "--cluster-default-policy"},
		{[]string{"destination", "--plaintext", "--source", "bogus"}, `--source "bogus": want kubernetes or dir:PATH`},
		{[]string{"destination", "--plaintext", "--source", "dir:"}, "--source dir: needs a path"},
		{[]string{"policy", "--plaintext", "--source", "bogus"}, `--source "bogus": want kubernetes or dir:PATH`},
		{[]string{"bench", "--services", "-1"}, "services must be at least 1"},
		{[]string{"bench", "--compare-shards", "1,x"}, "--compare-shards"},
		{[]string{"demo", "--replicas", "0"}, "--replicas 0: want 1 to 9"},
		{[]string{"bench", "proxy", "--rate", "0"}, "rate 0 outside"},
		// Without --dry-run too: the rules are checked before iptables is run.
		{[]string{"proxy-init", "--inbound-ports-to-ignore", "99999"}, `port "99999"`},
	} {
		code, out, errOut := capture(t, c.args...)
		if code != 2 || !strings.Contains(errOut, c.want) || strings.Count(errOut, "\n") != 1 || out != "" {
			t.Errorf("meridian %s: exit %d, stdout %q, stderr %q; want exit 2 and one line with %q", strings.Join(c.args, " "), code, out, errOut, c.want)
		}
	}
}
