package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/meridian-mesh/meridian/internal/testutil"
)

func TestMain(m *testing.M) {
	if os.Getenv(drainTestEnv) != "" {
		os.Exit(signalled(func(ctx context.Context) error {
			fmt.Fprintln(os.Stderr, "running")
			<-ctx.Done()
			fmt.Fprintln(os.Stderr, "draining")
			time.Sleep(2 * time.Minute) // a drain that the second signal must cut
			return nil
		}))
	}
	os.Exit(testutil.Main(m, nil))
}

// drainTestEnv, set, makes this test binary run signalled with a proxy stand-in that says
// "running", and "draining" once its context ends, then drains for 2 minutes.
const drainTestEnv = "MERIDIAN_PROXY_DRAIN_TEST"

// TestSecondSignalEndsTheDrain: the first SIGTERM stops the proxy gracefully, which drains for
// its grace period; a second one ends the process at once. It was caught and ignored until
// the drain was over (the kubelet's SIGKILL, or a user's second Ctrl-C, ended it).
func TestSecondSignalEndsTheDrain(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), drainTestEnv+"=1")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines, exited := make(chan string, 16), make(chan error, 1)
	var wg sync.WaitGroup
	wg.Go(func() {
		for sc := bufio.NewScanner(stderr); sc.Scan(); {
			lines <- sc.Text()
		}
		exited <- cmd.Wait()
	})
	t.Cleanup(func() { _ = cmd.Process.Kill(); wg.Wait() })
	for _, want := range []string{"running", "draining"} {
		if line := testutil.Recv(t, lines, 30*time.Second, "the stand-in to say "+want); line != want {
			t.Fatalf("stderr %q, want %q", line, want)
		}
		if want == "running" {
			if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
		}
	}
	testutil.Never(t, 300*time.Millisecond, "the process to exit while it drains", func() bool { return len(exited) > 0 })
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err = testutil.Recv(t, exited, 30*time.Second, "the process to end after the second SIGTERM")
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != -1 {
		t.Fatalf("the process ended with %v, want killed by the second SIGTERM", err)
	}
}

// TestCommandLine: help exits 0 and lists the flags, a bad flag, flag value or argument is a
// usage error (2), a missing setting is an error (1) that names the variable and its flag, as for
// `meridian proxy`.
func TestCommandLine(t *testing.T) {
	for _, tc := range []struct {
		args  []string
		ports string // LINKERD2_PROXY_INBOUND_PORTS
		code  int
		want  []string
	}{
		{[]string{"-h"}, "", 0, []string{"usage: meridian-proxy", "-destination-svc-addr"}},
		{[]string{"proxy", "--no-such-flag"}, "", 2, []string{"no-such-flag", "meridian-proxy -h"}},
		{[]string{"extra"}, "", 2, []string{"unexpected arguments"}},
		{nil, "", 1, []string{"LINKERD2_PROXY_DESTINATION_SVC_ADDR", "--destination-svc-addr"}},
		// The postStart hook of a proxy that is not a native sidecar: nothing listens on port 1.
		{[]string{"await", "--port=1", "--timeout=200ms"}, "", 1, []string{"not ready within 200ms"}},
		{[]string{"proxy", "await", "--port=0"}, "", 2, []string{"-port", "want a port, 1 to 65535"}},
		{[]string{"await", "--timeout=0"}, "", 2, []string{"-timeout", "want a positive duration"}},
		{[]string{"await", "--no-such-flag"}, "", 2, []string{"no-such-flag", "meridian-proxy await -h"}},
		{[]string{"await", "extra"}, "", 2, []string{"unexpected arguments"}},
		{[]string{"await", "-h"}, "", 0, []string{"usage: meridian-proxy await", "-timeout"}},
		// A bad variable does not stop help, and a flag can replace it.
		{[]string{"-h"}, "99999", 0, []string{"usage: meridian-proxy"}},
		{nil, "99999", 1, []string{`LINKERD2_PROXY_INBOUND_PORTS="99999"`}},
		{[]string{"--inbound-ports", "8080"}, "99999", 1, []string{"LINKERD2_PROXY_DESTINATION_SVC_ADDR"}},
	} {
		for _, k := range []string{"LINKERD2_PROXY_DESTINATION_SVC_ADDR", "LINKERD2_PROXY_IDENTITY_SVC_ADDR", "LINKERD2_PROXY_INBOUND_PORTS"} {
			t.Setenv(k, "")
			os.Unsetenv(k)
		}
		if tc.ports != "" {
			t.Setenv("LINKERD2_PROXY_INBOUND_PORTS", tc.ports)
		}
		var stdout, stderr bytes.Buffer
		code := exitCode(run(context.Background(), tc.args, &stdout), &stderr)
		out := stdout.String() + stderr.String()
		if code != tc.code {
			t.Errorf("%v: exit %d, want %d (%q)", tc.args, code, tc.code, out)
		}
		// An error is said once, on stderr, without the marker of its kind; help goes to stdout.
		if code == 2 && (stdout.Len() > 0 || strings.Contains(stderr.String(), "usage:")) {
			t.Errorf("%v: a usage error printed stdout %q, stderr %q; want one line on stderr", tc.args, stdout.String(), stderr.String())
		}
		if tc.ports != "" && tc.args != nil && tc.args[0] == "--inbound-ports" && strings.Contains(out, "INBOUND_PORTS") {
			t.Errorf("%v: the flag did not replace the bad variable: %q", tc.args, out)
		}
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("%v: output %q lacks %q", tc.args, out, w)
			}
		}
	}
}
