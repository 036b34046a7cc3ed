package main

import (
	"bufio"
	"errors"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/meridian-mesh/meridian/internal/testutil"
)

// buildMeridian builds ./cmd/meridian into the test's temporary directory: the demo runs its
// own binary, which in a test would be the test binary.
func buildMeridian(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the binary and runs the whole mesh")
	}
	if runtime.GOOS != "linux" {
		t.Skip("the demo's children die with it through Pdeathsig, on Linux only")
	}
	return testutil.BuildMeridian(t)
}

// demoNet is a loopback network of this test binary's own (127.N.0.0/16), so that the test
// does not meet a `make run` on the same machine.
func demoNet() string { return strconv.Itoa(100 + os.Getpid()%150) }

// startDemo starts `meridian demo args...` with its output in a pipe; at the end of the test
// it is killed (and with it, through Pdeathsig, every process it started) if still running.
func startDemo(t *testing.T, bin string, args ...string) (*exec.Cmd, *bufio.Reader) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"demo", "--dir", "../../deploy/examples", "--net", demoNet(), "--cache-dir", t.TempDir()}, args...)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd, bufio.NewReader(out)
}

// readUntil reads lines until one contains want, within d; it returns what it read.
func readUntil(t *testing.T, r *bufio.Reader, want string, d time.Duration) string {
	t.Helper()
	type result struct {
		text string
		err  error
	}
	done := make(chan result, 1)
	go func() {
		var b strings.Builder
		for {
			line, err := r.ReadString('\n')
			b.WriteString(line)
			if err != nil || strings.Contains(line, want) {
				done <- result{b.String(), err}
				return
			}
		}
	}()
	select {
	case res := <-done:
		if res.err != nil {
			t.Fatalf("the demo's output ended (%v) before %q:\n%s", res.err, want, res.text)
		}
		return res.text
	case <-time.After(d):
		t.Fatalf("no %q in the demo's output within %s", want, d)
		return ""
	}
}

// children are the processes whose parent is pid.
func children(t *testing.T, pid int) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, e := range entries {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st := testutil.ProcStat(n); len(st) > 3 && st[3] == strconv.Itoa(pid) {
			out = append(out, n)
		}
	}
	return out
}

// alive are the pids that still run (a zombie has stopped running).
func alive(pids []int) []int {
	var out []int
	for _, p := range pids {
		if testutil.Running(p) {
			out = append(out, p)
		}
	}
	return out
}

// TestDemoOnce runs `meridian demo --once` as `make run` users can: the whole mesh on the
// shipped example cluster, scripted. It checks that the HTTP, gRPC and opaque TCP routes
// succeed over mTLS with the identities verified on both sides, that the server
// applications saw the client's identity, that an edit of the directory reaches discovery,
// that the deny policy yields 403, that killing a destination replica mid-run fails no
// request, and that nothing is left running afterwards.
func TestDemoOnce(t *testing.T) {
	bin := buildMeridian(t)
	cmd, out := startDemo(t, bin, "--once")
	var pids []int
	testutil.Eventually(t, time.Minute, "the demo to start its processes", func() bool {
		pids = children(t, cmd.Process.Pid)
		return len(pids) >= 20
	})
	done := make(chan []byte, 1)
	go func() { b, _ := io.ReadAll(out); done <- b }()
	text := string(testutil.Recv(t, done, 2*time.Minute, "the demo's output to end"))
	err := cmd.Wait()
	t.Log(text)
	if err != nil {
		t.Fatalf("demo --once: %v", err)
	}
	for _, want := range []string{
		"PASS  HTTP loadgen -> web.shop.svc.cluster.local:80: ", "PASS  gRPC loadgen -> cart.shop.svc.cluster.local:9090: ",
		"PASS  TCP loadgen -> postgres.billing.svc.cluster.local:5432: ", "PASS  HTTP reports -> web.shop.svc.cluster.local:80: ",
		"PASS  HTTP loadgen -> web.shop.svc.cluster.local:80 mTLS: client loadgen.shop verified by the server's proxy, server web.shop verified",
		"PASS  gRPC loadgen -> cart.shop.svc.cluster.local:9090 mTLS: client loadgen.shop", "PASS  TCP loadgen -> postgres.billing.svc.cluster.local:5432 mTLS: client loadgen.shop",
		"PASS  HTTP loadgen -> web.shop.svc.cluster.local:80 client identity: the server application was given l5d-client-id loadgen.shop",
		"PASS  gRPC loadgen -> cart.shop.svc.cluster.local:9090 client identity: the server application was given l5d-client-id loadgen.shop",
		"PASS  HTTP reports -> web.shop.svc.cluster.local:80 client identity: the server application was given l5d-client-id reports.billing",
		"PASS  HTTP loadgen -> inventory.legacy.svc.cluster.local:80 plaintext",
		"PASS  edit the example cluster", "PASS  deny policy web-deny.yaml: ", "refused with 403", "reports, which it admits, got",
		"PASS  kill a destination replica: killed dst-", "0 requests failed meanwhile", "checks passed",
		"shop/search", "no ready endpoints",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the output lacks %q", want)
		}
	}
	if strings.Contains(text, "FAIL ") {
		t.Error("a check failed")
	}
	testutil.Eventually(t, 10*time.Second, "every process of the demo to be gone", func() bool { return len(alive(pids)) == 0 })
}

// TestDemoStopsEverything: Ctrl-C (SIGINT) stops the demo and every process it started (it
// bounds the stop at 4 s); a demo killed with SIGKILL takes its processes with it (the
// kernel kills them: Pdeathsig). Nothing is left running either way.
func TestDemoStopsEverything(t *testing.T) {
	bin := buildMeridian(t)
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGKILL} {
		t.Run(sig.String(), func(t *testing.T) {
			cmd, out := startDemo(t, bin)
			readUntil(t, out, "Ctrl-C stops everything", time.Minute)
			pids := children(t, cmd.Process.Pid)
			if len(pids) < 20 {
				t.Fatalf("%d children, want the whole mesh", len(pids))
			}
			go func() { _, _ = io.Copy(io.Discard, out) }()
			t0 := time.Now()
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			waited := make(chan error, 1)
			go func() { waited <- cmd.Wait() }()
			err := testutil.Recv(t, waited, 30*time.Second, "the demo to exit")
			var ee *exec.ExitError
			switch {
			case sig == syscall.SIGINT && err != nil:
				t.Errorf("after SIGINT: %v, want exit 0", err)
			case sig == syscall.SIGKILL && !errors.As(err, &ee):
				t.Errorf("after SIGKILL: %v", err)
			}
			testutil.Eventually(t, 10*time.Second, "every process of the demo to be gone", func() bool { return len(alive(pids)) == 0 })
			t.Logf("%s: the demo and its %d processes were gone %s after the signal", sig, len(pids), time.Since(t0).Round(10*time.Millisecond))
		})
	}
}
