package child

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/meridian-mesh/meridian/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.ChildMain(m, nil)) }

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

	err := p.WaitHTTP(context.Background(), client, url, 300*time.Millisecond, "ready")
	if err == nil || !strings.Contains(err.Error(), "sleep not ready at "+url+" within 300ms (503 Service Unavailable: warming up)") {
		t.Errorf("WaitHTTP of a 503 = %v", err)
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
