package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"
)

// Role says what a process is; processes stop in the order of their roles (the traffic
// first, the control plane last), so that nothing logs the loss of what it depends on.
type Role int

const (
	RoleTraffic Role = iota // the traffic generator
	RoleProxy               // a pod's meridian proxy
	RoleApp                 // a pod's application
	RoleControl             // destination, identity, policy
)

func (r Role) String() string {
	return [...]string{"traffic", "proxy", "app", "control plane"}[r]
}

// Spec is one child process: `<binary> Args...` with Env added to the demo's environment.
type Spec struct {
	Name string // unique; names the log file (<log dir>/<Name>.log) and the process in the view
	Role Role
	Args []string
	Env  []string
	// Ready is the URL that answers 200 once the process is ready (its admin /ready); empty
	// when it has none.
	Ready string
}

// Exit reports a process that ended.
type Exit struct {
	Name string
	Pid  int
	Err  error // the wait status (nil: exit 0)
	// Expected is true when the demo ended it (Stop, Kill).
	Expected bool
}

// Supervisor starts and stops the demo's child processes. Each child runs in its own process
// group (a Ctrl-C in the terminal reaches only the demo, which stops them in order) and, on
// Linux, is killed by the kernel when the demo dies (Pdeathsig). Children are started from
// one goroutine locked to its OS thread, because Pdeathsig fires when the thread that
// started the child ends, not the process.
//
// Close stops every child and must be called; the Supervisor owns the goroutines that wait
// for the children. Safe for concurrent use.
type Supervisor struct {
	binary, logDir string
	env            []string
	log            *zap.Logger

	spawn   chan spawnReq
	spawned chan struct{} // closed when the spawner goroutine has returned
	exits   chan Exit

	mu     sync.Mutex
	procs  []*Proc
	closed bool
	wg     sync.WaitGroup // the waiters
}

type spawnReq struct {
	cmd  *exec.Cmd
	done chan error
}

// exitBuffer bounds the exits reported and not yet read; further ones are dropped (the
// process's state still says it ended).
const exitBuffer = 64

// NewSupervisor returns a supervisor that runs binary, with the children's logs in logDir
// (created) and its own in log (may be nil).
func NewSupervisor(binary, logDir string, log *zap.Logger) (*Supervisor, error) {
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return nil, err
	}
	if log == nil {
		log = zap.NewNop()
	}
	s := &Supervisor{binary: binary, logDir: logDir, env: childEnv(os.Environ()), log: log,
		spawn: make(chan spawnReq), spawned: make(chan struct{}), exits: make(chan Exit, exitBuffer)}
	go s.spawner()
	return s, nil
}

// childEnv is the demo's environment without what would reconfigure the children behind the
// demo's back (a proxy reads LINKERD2_PROXY_* from its environment).
func childEnv(env []string) []string {
	return slices.DeleteFunc(slices.Clone(env), func(kv string) bool {
		return strings.HasPrefix(kv, "LINKERD2_PROXY_") || strings.HasPrefix(kv, "MERIDIAN_PROXY_")
	})
}

func (s *Supervisor) spawner() {
	runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
	defer close(s.spawned)
	for req := range s.spawn {
		req.done <- req.cmd.Start()
	}
}

// Exits reports every process that ended, in order; a consumer that falls behind loses the
// oldest reports beyond a bounded buffer.
func (s *Supervisor) Exits() <-chan Exit { return s.exits }

// Procs returns the processes in the order they were first started.
func (s *Supervisor) Procs() []*Proc {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.procs)
}

// Proc returns the process named name, or nil.
func (s *Supervisor) Proc(name string) *Proc {
	for _, p := range s.Procs() {
		if p.spec.Name == name {
			return p
		}
	}
	return nil
}

// Start starts a new process.
func (s *Supervisor) Start(spec Spec) (*Proc, error) {
	if s.Proc(spec.Name) != nil {
		return nil, fmt.Errorf("process %s started twice", spec.Name)
	}
	p := &Proc{spec: spec, sup: s, done: closedChan()}
	if err := p.start(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.procs = append(s.procs, p)
	s.mu.Unlock()
	return p, nil
}

func closedChan() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}

// launch starts cmd on the spawner's thread.
func (s *Supervisor) launch(cmd *exec.Cmd) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return errors.New("the demo is stopping")
	}
	s.wg.Add(1) // released by the waiter, or below when the start fails
	s.mu.Unlock()
	req := spawnReq{cmd: cmd, done: make(chan error, 1)}
	s.spawn <- req
	if err := <-req.done; err != nil {
		s.wg.Done()
		return err
	}
	return nil
}

// StopAll stops every process within about total, role by role: the traffic, then the
// proxies and applications (at once), then the control plane one process at a time in the
// reverse order of their start (replicas leaving a ring one by one each leave at once;
// leaving together, each waits for the others' acknowledgements). A process still running
// when its role's share of total has passed gets SIGKILL. It returns once every process has
// exited.
func (s *Supervisor) StopAll(total time.Duration) {
	procs := s.Procs()
	of := func(roles ...Role) []*Proc {
		var out []*Proc
		for _, p := range procs {
			if slices.Contains(roles, p.spec.Role) && p.Alive() {
				out = append(out, p)
			}
		}
		return out
	}
	s.stopTogether(of(RoleTraffic), total*15/100)
	s.stopTogether(of(RoleProxy, RoleApp), total*35/100)
	control := of(RoleControl)
	slices.Reverse(control)
	deadline := time.Now().Add(total / 2)
	for _, p := range control {
		s.stopOne(p, max(time.Until(deadline), 100*time.Millisecond))
	}
}

func (s *Supervisor) stopTogether(procs []*Proc, grace time.Duration) {
	var wg sync.WaitGroup
	for _, p := range procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.stopOne(p, grace)
		}()
	}
	wg.Wait()
}

func (s *Supervisor) stopOne(p *Proc, grace time.Duration) {
	t0 := time.Now()
	if killed := p.Stop(grace); killed {
		s.log.Warn("killed after the grace", zap.String("process", p.Name()), zap.Duration("grace", grace))
	} else {
		s.log.Debug("stopped", zap.String("process", p.Name()), zap.Duration("took", time.Since(t0)))
	}
}

// Close stops every process (StopAll with a 4 s bound), waits for them and ends the
// supervisor's goroutines. It is idempotent.
func (s *Supervisor) Close() {
	s.mu.Lock()
	already := s.closed
	s.closed = true // nothing starts any more
	s.mu.Unlock()
	s.StopAll(4 * time.Second)
	if already {
		return
	}
	s.wg.Wait()
	close(s.spawn)
	<-s.spawned
}

// Proc is one child process; it may be killed and started again.
type Proc struct {
	spec Spec
	sup  *Supervisor

	mu       sync.Mutex
	cmd      *exec.Cmd
	pid      int
	done     chan struct{} // closed when the current run has exited
	err      error         // the current run's exit status, once done
	stopping bool          // the demo ended the current run
	starts   int
}

// Name is the process's name; Role its role.
func (p *Proc) Name() string { return p.spec.Name }
func (p *Proc) Role() Role   { return p.spec.Role }

// Spec returns what the process runs.
func (p *Proc) Spec() Spec { return p.spec }

// LogPath is the file the process's output goes to.
func (p *Proc) LogPath() string { return filepath.Join(p.sup.logDir, logName(p.spec.Name)) }

func logName(name string) string {
	return strings.Map(func(r rune) rune {
		if r == '/' || r == ' ' || r == os.PathSeparator {
			return '_'
		}
		return r
	}, name) + ".log"
}

// start runs the process (again).
func (p *Proc) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.done:
	default:
		return fmt.Errorf("%s is running", p.spec.Name)
	}
	f, err := os.OpenFile(p.LogPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	fmt.Fprintf(f, "=== %s: %s %s\n", time.Now().Format(time.RFC3339), filepath.Base(p.sup.binary), strings.Join(p.spec.Args, " "))
	cmd := exec.Command(p.sup.binary, p.spec.Args...)
	cmd.Env = append(slices.Clone(p.sup.env), p.spec.Env...)
	cmd.Stdout, cmd.Stderr = f, f
	setProcAttrs(cmd)
	if err := p.sup.launch(cmd); err != nil {
		f.Close()
		return fmt.Errorf("start %s: %w", p.spec.Name, err)
	}
	done := make(chan struct{})
	p.cmd, p.pid, p.done, p.err, p.stopping = cmd, cmd.Process.Pid, done, nil, false
	p.starts++
	go p.wait(cmd, f, done)
	return nil
}

func (p *Proc) wait(cmd *exec.Cmd, f io.Closer, done chan struct{}) {
	defer p.sup.wg.Done()
	err := cmd.Wait()
	f.Close()
	p.mu.Lock()
	p.err = err
	expected := p.stopping
	close(done)
	p.mu.Unlock()
	select {
	case p.sup.exits <- Exit{Name: p.spec.Name, Pid: cmd.Process.Pid, Err: err, Expected: expected}:
	default:
	}
}

// Pid is the process id of the current (or last) run.
func (p *Proc) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pid
}

// Starts is how many times the process was started.
func (p *Proc) Starts() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.starts
}

// Alive reports whether the current run has not exited.
func (p *Proc) Alive() bool {
	select {
	case <-p.doneChan():
		return false
	default:
		return true
	}
}

// Done is closed when the current run exits.
func (p *Proc) doneChan() chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.done
}

// Err is the exit status of the last run once it exited.
func (p *Proc) Err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// signal sends sig to the current run, marking its end as expected.
func (p *Proc) signal(sig os.Signal) (done chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.done:
	default:
		p.stopping = true
		_ = p.cmd.Process.Signal(sig)
	}
	return p.done
}

// Kill ends the process at once (SIGKILL, as a crash would) and waits for it.
func (p *Proc) Kill() {
	<-p.signal(syscall.SIGKILL)
}

// Stop ends the process: SIGTERM, then SIGKILL after grace. It returns once it has exited,
// and whether it had to be killed.
func (p *Proc) Stop(grace time.Duration) (killed bool) {
	done := p.signal(syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-done:
		return false
	case <-t.C:
		p.Kill()
		return true
	}
}

// Restart starts a process that has exited again.
func (p *Proc) Restart() error { return p.start() }

// WaitReady polls the process's Ready URL until it answers 200, the process exits, ctx ends
// or timeout passes.
func (p *Proc) WaitReady(ctx context.Context, timeout time.Duration) error {
	if p.spec.Ready == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	done := p.doneChan()
	probeCtx, stopProbe := context.WithCancel(ctx) // a probe in flight ends with the process
	defer stopProbe()
	go func() {
		select {
		case <-done:
			stopProbe()
		case <-probeCtx.Done():
		}
	}()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var last string
	for {
		if last = probe(probeCtx, p.spec.Ready); last == "" {
			return nil
		}
		select {
		case <-done:
			return fmt.Errorf("%s exited before it was ready (%v); %s ends:\n%s", p.spec.Name, p.Err(), p.LogPath(), p.LogTail(12))
		case <-ctx.Done():
			return fmt.Errorf("%s not ready within %s (%s); %s ends:\n%s", p.spec.Name, timeout, last, p.LogPath(), p.LogTail(12))
		case <-tick.C:
		}
	}
}

var probeClient = &http.Client{Timeout: 2 * time.Second}

// probe GETs url and returns "" for a 200, else what it got.
func probe(ctx context.Context, url string) string {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err.Error()
	}
	resp, err := probeClient.Do(req)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode == http.StatusOK {
		return ""
	}
	return resp.Status + ": " + strings.TrimSpace(string(body))
}

// LogTail returns the last n lines of the process's log.
func (p *Proc) LogTail(n int) string {
	f, err := os.Open(p.LogPath())
	if err != nil {
		return ""
	}
	defer f.Close()
	const max = 16 << 10
	if st, err := f.Stat(); err == nil && st.Size() > max {
		_, _ = f.Seek(st.Size()-max, io.SeekStart)
	}
	b, _ := io.ReadAll(io.LimitReader(f, max))
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "  " + strings.Join(lines, "\n  ")
}
