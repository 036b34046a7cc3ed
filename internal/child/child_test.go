package child

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/meridian-mesh/meridian/internal/testutil"
)

// parentEnv makes the test binary a parent (parent): it starts a grandchild with Start.
const parentEnv = "MERIDIAN_CHILD_TEST_PARENT"

func TestMain(m *testing.M) {
	if log := os.Getenv(parentEnv); log != "" {
		os.Exit(parent(log))
	}
	os.Exit(testutil.ChildMain(m, nil))
}

// parent starts this binary as a "sleep" child with Start, its output in log, prints
// "grandchild PID", then ends threads (goroutines that lock one and return), prints
// "churned" and waits for its own end (SIGKILL, from the test) for at most a minute.
func parent(log string) int {
	self, err := os.Executable()
	if err != nil {
		return 6
	}
	g, err := Start("grandchild", self, testutil.ChildArgs, Options{Env: append(os.Environ(), parentEnv+"=", testutil.ChildEnv+"=sleep"), Log: log})
	if err != nil {
		fmt.Println(err)
		return 7
	}
	fmt.Println("grandchild", g.Pid())
	var wg sync.WaitGroup
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		}()
	}
	wg.Wait()
	fmt.Println("churned")
	time.Sleep(time.Minute)
	return 4
}

// start runs this test binary as a child in mode.
func start(t *testing.T, mode string, o Options) *Proc {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if o.Log == "" {
		o.Log = filepath.Join(t.TempDir(), mode+".log")
	}
	o.Env = append(os.Environ(), testutil.ChildEnv+"="+mode)
	p, err := Start(mode, self, testutil.ChildArgs, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Kill)
	return p
}

func logHas(p *Proc, s string) func() bool {
	return func() bool {
		b, _ := os.ReadFile(p.LogPath())
		return bytes.Contains(b, []byte(s))
	}
}

func TestStopEndsWithSIGTERM(t *testing.T) {
	var copied testutil.Buffer
	p := start(t, "sleep", Options{Banner: "=== run 1", Output: &copied})
	testutil.Eventually(t, 10*time.Second, "the child to start", logHas(p, "sleeping"))
	if !p.Alive() {
		t.Fatal("not alive")
	}
	if pgid, err := syscall.Getpgid(p.Pid()); err != nil || pgid != p.Pid() {
		t.Errorf("process group %d (%v), want its own (%d)", pgid, err, p.Pid())
	}
	if killed := p.Stop(10 * time.Second); killed {
		t.Error("Stop killed a child that ends on SIGTERM")
	}
	if p.Alive() || p.Err() != nil {
		t.Errorf("after Stop: alive %v, exit %v; want exited 0", p.Alive(), p.Err())
	}
	if got, want := p.LogTail(10), "=== run 1\nsleeping\nterminated"; got != want {
		t.Errorf("log %q, want %q", got, want)
	}
	if got := copied.String(); got != "sleeping\nterminated\n" {
		t.Errorf("output copied %q", got)
	}
	if p.Stop(time.Second) {
		t.Error("a second Stop killed")
	}
}

func TestStopKillsWhatIgnoresSIGTERM(t *testing.T) {
	p := start(t, "stubborn", Options{})
	testutil.Eventually(t, 10*time.Second, "the child to ignore SIGTERM", logHas(p, "ignoring"))
	if killed := p.Stop(100 * time.Millisecond); !killed {
		t.Error("Stop did not report the kill")
	}
	if sig := testutil.KilledBy(p.Err()); sig != syscall.SIGKILL {
		t.Errorf("exit %v, want killed by SIGKILL", p.Err())
	}
}

// TestChildDiesWithParent: a child outlives threads of its parent ending, and the kernel
// kills it when its parent dies, even by SIGKILL (Pdeathsig). It fails without Pdeathsig;
// it would rarely catch a Start that does not keep its thread locked, because the goroutine
// that forks usually keeps its thread through the Wait that follows anyway.
func TestChildDiesWithParent(t *testing.T) {
	dir := t.TempDir()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	grandLog := filepath.Join(dir, "grandchild.log")
	par, err := Start("parent", self, testutil.ChildArgs, Options{Env: append(os.Environ(), parentEnv+"="+grandLog), Log: filepath.Join(dir, "parent.log")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(par.Kill)
	testutil.Eventually(t, 20*time.Second, "the parent to start its child and end threads", logHas(par, "churned"))
	var pid int
	if _, err := fmt.Sscanf(par.LogTail(2), "grandchild %d", &pid); err != nil || pid <= 0 {
		t.Fatalf("parent's log %q: %v", par.LogTail(2), err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	testutil.Eventually(t, 10*time.Second, "the grandchild to run", func() bool {
		b, _ := os.ReadFile(grandLog)
		return bytes.Contains(b, []byte("sleeping"))
	})
	if !testutil.Running(pid) {
		t.Fatal("the grandchild died when threads of its parent ended")
	}
	par.Kill()
	testutil.Eventually(t, 10*time.Second, "the grandchild to die with its parent", func() bool { return !testutil.Running(pid) })
}

func TestTruncateAndMode(t *testing.T) {
	log := filepath.Join(t.TempDir(), "lines.log")
	for _, o := range []Options{{Log: log}, {Log: log}, {Log: log, Truncate: true, Mode: 0o600}} {
		p := start(t, "lines", o)
		testutil.Eventually(t, 10*time.Second, "the exit", func() bool { return !p.Alive() })
	}
	b, err := os.ReadFile(log)
	if err != nil || string(b) != "line 1\nline 2\nline 3\nline 4\nline 5\n" {
		t.Errorf("log after two appended runs and a truncating one: %q, %v", b, err)
	}
	if st, err := os.Stat(log); err != nil || st.Mode().Perm() != 0o644&^umask() {
		t.Errorf("log mode %v (%v), want 0644 (it was created without Mode; Mode applies on creation only)", st.Mode(), err)
	}
	fresh := filepath.Join(t.TempDir(), "private.log")
	p := start(t, "lines", Options{Log: fresh, Mode: 0o600})
	testutil.Eventually(t, 10*time.Second, "the exit", func() bool { return !p.Alive() })
	if st, err := os.Stat(fresh); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("log mode %v (%v), want 0600", st.Mode(), err)
	}
}

// umask returns the process's file mode creation mask.
func umask() os.FileMode {
	m := syscall.Umask(0)
	syscall.Umask(m)
	return os.FileMode(m)
}

func TestLogTailAndFailure(t *testing.T) {
	p := start(t, "lines", Options{})
	testutil.Eventually(t, 10*time.Second, "the exit", func() bool { return !p.Alive() })
	if got := p.LogTail(2); got != "line 4\nline 5" {
		t.Errorf("LogTail(2) = %q", got)
	}
	err := p.Failure("before it was ready")
	for _, want := range []string{"lines exited (exit status 3) before it was ready", p.LogPath(), "line 1\n", "line 5"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Failure = %q, want it to contain %q", err, want)
		}
	}
}

func TestStartRefusesWhatCannotRun(t *testing.T) {
	dir := t.TempDir()
	_, err := Start("nothing", filepath.Join(dir, "absent"), nil, Options{Log: filepath.Join(dir, "x.log")})
	if err == nil || !strings.Contains(err.Error(), "start nothing") {
		t.Errorf("Start of a missing binary = %v", err)
	}
	_, err = Start("nolog", "/bin/true", nil, Options{Log: filepath.Join(dir, "no", "such", "dir.log")})
	if err == nil || !strings.Contains(err.Error(), "start nolog") {
		t.Errorf("Start with an unwritable log = %v", err)
	}
}

// readyServer answers 503 until ready is set, then 200.
func readyServer(t *testing.T, ready *atomic.Bool) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if !ready.Load() {
			http.Error(w, "warming up", http.StatusServiceUnavailable)
		}
	})}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close(); <-done })
	return "http://" + l.Addr().String() + "/ready"
}

func TestWaitHTTP(t *testing.T) {
	client := &http.Client{Timeout: 5 * time.Second}
	var ready atomic.Bool
	url := readyServer(t, &ready)
	p := start(t, "sleep", Options{})

	err := p.WaitHTTP(context.Background(), client, url, 2*time.Second, "ready")
	if err == nil || !strings.Contains(err.Error(), "sleep not ready at "+url+" within 2s (503 Service Unavailable: warming up)") || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("WaitHTTP of a 503 = %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	err = p.WaitHTTP(ctx, client, url, 30*time.Second, "ready")
	if err == nil || !strings.Contains(err.Error(), "sleep not ready at "+url+": the wait ended (context canceled;") || !errors.Is(err, context.Canceled) {
		t.Errorf("WaitHTTP whose context is cancelled = %v", err)
	}
	time.AfterFunc(100*time.Millisecond, func() { ready.Store(true) })
	if err := p.WaitHTTP(context.Background(), client, url, 30*time.Second, "ready"); err != nil {
		t.Errorf("WaitHTTP once it answers 200 = %v", err)
	}

	ready.Store(false)
	q := start(t, "lines", Options{})
	err = q.WaitHTTP(context.Background(), client, url, 30*time.Second, "ready")
	if err == nil || !strings.Contains(err.Error(), "lines exited (exit status 3) before it was ready") || !strings.Contains(err.Error(), "line 5") {
		t.Errorf("WaitHTTP of a child that exits = %v", err)
	}
}

func TestAddrInUse(t *testing.T) {
	client := &http.Client{Timeout: 5 * time.Second}
	var ready atomic.Bool
	url := readyServer(t, &ready)
	port, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	// The port is free: a child listens on it, and a second one, started while the first
	// holds it, exits with Go's bind error, which its wait reports as ErrAddrInUse.
	// The first child's log names the error too (its banner), for the wait on it below: a
	// child still running is not one that lost its port, whatever its log says.
	first := start(t, "listen "+addr, Options{Banner: "a banner that says address already in use"})
	testutil.Eventually(t, 10*time.Second, "the first child to listen", logHas(first, "listening"))
	second := start(t, "listen "+addr, Options{})
	err = second.WaitHTTP(context.Background(), client, url, 30*time.Second, "ready")
	if !errors.Is(err, ErrAddrInUse) || !strings.Contains(err.Error(), "address already in use") {
		t.Errorf("WaitHTTP of a child that could not bind = %v, want ErrAddrInUse", err)
	}
	// A child that exits for another reason, and one that is alive when the wait ends, do
	// not wrap it.
	err = start(t, "lines", Options{}).WaitHTTP(context.Background(), client, url, 30*time.Second, "ready")
	if err == nil || errors.Is(err, ErrAddrInUse) {
		t.Errorf("WaitHTTP of a child that exits 3 = %v, want an error without ErrAddrInUse", err)
	}
	err = first.WaitHTTP(context.Background(), client, url, 200*time.Millisecond, "ready")
	if err == nil || errors.Is(err, ErrAddrInUse) {
		t.Errorf("WaitHTTP of a listening child = %v, want a timeout without ErrAddrInUse", err)
	}
}
