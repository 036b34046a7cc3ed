package demo

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/meridian-mesh/meridian/internal/testutil"
)

// newTestSupervisor runs this test binary as its children (see TestMain).
func newTestSupervisor(t *testing.T) *Supervisor {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSupervisor(self, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func testChild(name, mode string, role Role) Spec {
	return Spec{Name: name, Role: role, Env: []string{testutil.ChildEnv + "=" + mode}, Args: testutil.ChildArgs}
}

func itoa(n int) string { return strconv.Itoa(n) }

func TestSupervisorStopsInOrderAndReportsExits(t *testing.T) {
	s := newTestSupervisor(t)
	ctl, err := s.Start(testChild("dst-0", "sleep", RoleControl))
	if err != nil {
		t.Fatal(err)
	}
	app, err := s.Start(testChild("app/web", "sleep", RoleApp))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Start(testChild("app/web", "sleep", RoleApp)); err == nil {
		t.Error("a second process of one name started")
	}
	if !ctl.Alive() || !app.Alive() || ctl.Pid() == app.Pid() {
		t.Fatalf("not running: %v %v", ctl.Alive(), app.Alive())
	}
	s.StopAll(4 * time.Second)
	if ctl.Alive() || app.Alive() || testutil.Running(ctl.Pid()) || testutil.Running(app.Pid()) {
		t.Fatal("StopAll left a process running")
	}
	got := map[string]Exit{}
	for range 2 {
		e := testutil.Recv(t, s.Exits(), 10*time.Second, "an exit")
		got[e.Name] = e
	}
	for _, name := range []string{"dst-0", "app/web"} {
		// exit 0 when its handler ran, "terminated" when SIGTERM came before the handler.
		if e := got[name]; !e.Expected || (e.Err != nil && testutil.KilledBy(e.Err) != syscall.SIGTERM) {
			t.Errorf("%s: %+v, want an expected end by SIGTERM", name, e)
		}
	}
}

// ignores reports whether process pid ignores sig, from /proc/<pid>/status.
func ignores(pid int, sig syscall.Signal) bool {
	b, err := os.ReadFile("/proc/" + itoa(pid) + "/status")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if hex, ok := strings.CutPrefix(line, "SigIgn:"); ok {
			mask, err := strconv.ParseUint(strings.TrimSpace(hex), 16, 64)
			return err == nil && mask&(1<<(uint(sig)-1)) != 0
		}
	}
	return false
}

func TestSupervisorKillsWhatIgnoresSIGTERM(t *testing.T) {
	s := newTestSupervisor(t)
	p, err := s.Start(testChild("stubborn", "stubborn", RoleProxy))
	if err != nil {
		t.Fatal(err)
	}
	// Wait until the child ignores SIGTERM itself: other bits of SigIgn may be
	// inherited (a CI runner often ignores SIGPIPE or SIGHUP), so test SIGTERM's.
	testutil.Eventually(t, 10*time.Second, "the child to ignore SIGTERM", func() bool {
		return ignores(p.Pid(), syscall.SIGTERM)
	})
	p.Stop(200 * time.Millisecond)
	if err := p.Err(); testutil.KilledBy(err) != syscall.SIGKILL {
		t.Errorf("exit %v, want killed by SIGKILL after the grace", err)
	}
}

func TestSupervisorReportsAnUnexpectedExitAndRestarts(t *testing.T) {
	s := newTestSupervisor(t)
	p, err := s.Start(testChild("flaky", "exit3", RoleApp))
	if err != nil {
		t.Fatal(err)
	}
	e := testutil.Recv(t, s.Exits(), 10*time.Second, "the exit")
	if e.Name != "flaky" || e.Expected || e.Err == nil || !strings.Contains(e.Err.Error(), "exit status 3") {
		t.Errorf("exit %+v, want an unexpected exit status 3", e)
	}
	if err := p.WaitReady(context.Background(), time.Second); err != nil {
		t.Errorf("WaitReady without a Ready URL = %v", err)
	}
	first := p.Pid()
	if err := p.Restart(); err != nil {
		t.Fatal(err)
	}
	testutil.Recv(t, s.Exits(), 10*time.Second, "the second exit")
	if p.Starts() != 2 || p.Pid() == first {
		t.Errorf("starts %d, pids %d %d", p.Starts(), first, p.Pid())
	}
	if !strings.Contains(p.LogTail(5), "=== ") {
		t.Errorf("log %q lacks the start lines", p.LogTail(5))
	}
}

func TestSupervisorWaitReadySaysWhyNot(t *testing.T) {
	s := newTestSupervisor(t)
	spec := testChild("never-ready", "exit3", RoleApp)
	spec.Ready = "http://" + testutil.Listen(t).Addr().String() + "/ready"
	p, err := s.Start(spec)
	if err != nil {
		t.Fatal(err)
	}
	err = p.WaitReady(context.Background(), 10*time.Second)
	if err == nil || !strings.Contains(err.Error(), "never-ready exited (exit status 3) before it was ready") {
		t.Errorf("WaitReady = %v, want the exit named", err)
	}
}

func TestSupervisorKillAndClose(t *testing.T) {
	s := newTestSupervisor(t)
	p, err := s.Start(testChild("dst-1", "sleep", RoleControl))
	if err != nil {
		t.Fatal(err)
	}
	p.Kill()
	if e := testutil.Recv(t, s.Exits(), 10*time.Second, "the exit"); !e.Expected {
		t.Errorf("a kill reported as unexpected: %+v", e)
	}
	q, err := s.Start(testChild("dst-2", "stubborn", RoleControl))
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if q.Alive() || testutil.Running(q.Pid()) {
		t.Error("Close left a process running")
	}
	if _, err := s.Start(testChild("late", "sleep", RoleApp)); err == nil {
		t.Error("Start after Close succeeded")
	}
	s.Close() // idempotent
}

// TestSupervisorStartFailure: a process that cannot start is refused with one error naming
// it, and is not kept: its name can be started again.
func TestSupervisorStartFailure(t *testing.T) {
	s, err := NewSupervisor(filepath.Join(t.TempDir(), "absent"), t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	_, err = s.Start(testChild("dst-0", "sleep", RoleControl))
	if err == nil || strings.Count(err.Error(), "start dst-0") != 1 {
		t.Errorf("Start of a missing binary = %v, want one error naming dst-0 once", err)
	}
	if s.Proc("dst-0") != nil || len(s.Procs()) != 0 {
		t.Errorf("a process that did not start is kept: %v", s.Procs())
	}
}
