package demo

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/meridian-mesh/meridian/internal/child"
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

// Supervisor starts and stops the demo's child processes (internal/child: each in its own
// process group, so a Ctrl-C in the terminal reaches only the demo, which stops them in
// order; on Linux killed by the kernel when the demo dies).
//
// Close stops every child and must be called; the Supervisor owns the goroutines that report
// the children's exits. Safe for concurrent use.
type Supervisor struct {
	binary, logDir string
	env            []string
	log            *zap.Logger

	exits chan Exit

	mu     sync.Mutex
	procs  []*Proc
	closed bool
	wg     sync.WaitGroup // the exit reporters
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
	return &Supervisor{binary: binary, logDir: logDir, env: childEnv(os.Environ()), log: log,
		exits: make(chan Exit, exitBuffer)}, nil
}

// childEnv is the demo's environment without what would reconfigure the children behind the
// demo's back (a proxy reads LINKERD2_PROXY_* from its environment).
func childEnv(env []string) []string {
	return slices.DeleteFunc(slices.Clone(env), func(kv string) bool {
		return strings.HasPrefix(kv, "LINKERD2_PROXY_") || strings.HasPrefix(kv, "MERIDIAN_PROXY_")
	})
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
	p := &Proc{spec: spec, sup: s}
	s.mu.Lock()
	if slices.ContainsFunc(s.procs, func(q *Proc) bool { return q.spec.Name == spec.Name }) {
		s.mu.Unlock()
		return nil, fmt.Errorf("process %s started twice", spec.Name)
	}
	s.procs = append(s.procs, p) // before its start, so that a Close meanwhile stops it
	s.mu.Unlock()
	if err := p.start(); err != nil {
		s.mu.Lock()
		s.procs = slices.DeleteFunc(s.procs, func(q *Proc) bool { return q == p })
		s.mu.Unlock()
		return nil, err
	}
	return p, nil
}

// launch starts a run of p's, unless the supervisor is closed. It holds the supervisor's
// lock until the child runs, so that Close, which takes it first, either sees the run (p's
// own lock, which the caller holds, delays its look until the run is recorded) or refuses it.
func (s *Supervisor) launch(p *Proc) (*procRun, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, fmt.Errorf("start %s: the demo is stopping", p.spec.Name)
	}
	s.wg.Add(1) // released by the run's reporter, or below when the start fails
	cp, err := child.Start(p.spec.Name, s.binary, p.spec.Args, child.Options{
		Env:    append(slices.Clone(s.env), p.spec.Env...),
		Log:    p.LogPath(),
		Banner: fmt.Sprintf("=== %s: %s %s", time.Now().Format(time.RFC3339), filepath.Base(s.binary), strings.Join(p.spec.Args, " ")),
	})
	if err != nil {
		s.wg.Done()
		return nil, err
	}
	return &procRun{Proc: cp}, nil
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
	s.closed = true // nothing starts any more
	s.mu.Unlock()
	s.StopAll(4 * time.Second)
	s.wg.Wait()
}

// Proc is one child process; it may be killed and started again.
type Proc struct {
	spec Spec
	sup  *Supervisor

	mu     sync.Mutex
	run    *procRun // the current (or last) run; nil before the first
	starts int
}

// procRun is one run of a Proc.
type procRun struct {
	*child.Proc
	ended atomic.Bool // the demo ended it (Stop, Kill)
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
	if p.run != nil && p.run.Alive() {
		return fmt.Errorf("%s is running", p.spec.Name)
	}
	r, err := p.sup.launch(p) // its errors name p
	if err != nil {
		return err
	}
	p.run = r
	p.starts++
	go p.report(r)
	return nil
}

// report sends the run's Exit once it has ended.
func (p *Proc) report(r *procRun) {
	defer p.sup.wg.Done()
	<-r.Exited()
	select {
	case p.sup.exits <- Exit{Name: p.spec.Name, Pid: r.Pid(), Err: r.Err(), Expected: r.ended.Load()}:
	default:
	}
}

// current returns the current run (nil before the first).
func (p *Proc) current() *procRun {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.run
}

// Pid is the process id of the current (or last) run.
func (p *Proc) Pid() int {
	if run := p.current(); run != nil {
		return run.Pid()
	}
	return 0
}

// Starts is how many times the process was started.
func (p *Proc) Starts() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.starts
}

// Alive reports whether the current run has not exited.
func (p *Proc) Alive() bool {
	run := p.current()
	return run != nil && run.Alive()
}

// Err is the exit status of the last run once it exited.
func (p *Proc) Err() error {
	if run := p.current(); run != nil && !run.Alive() {
		return run.Err()
	}
	return nil
}

// ending marks the current run's end as the demo's doing and returns it (nil when there is
// no run).
func (p *Proc) ending() *procRun {
	r := p.current()
	if r != nil && r.Alive() {
		r.ended.Store(true)
	}
	return r
}

// Kill ends the process at once (SIGKILL, as a crash would) and waits for it.
func (p *Proc) Kill() {
	if run := p.ending(); run != nil {
		run.Kill()
	}
}

// Stop ends the process: SIGTERM, then SIGKILL after grace. It returns once it has exited,
// and whether it had to be killed.
func (p *Proc) Stop(grace time.Duration) (killed bool) {
	if run := p.ending(); run != nil {
		return run.Stop(grace)
	}
	return false
}

// Restart starts a process that has exited again.
func (p *Proc) Restart() error { return p.start() }

var probeClient = &http.Client{Timeout: 2 * time.Second}

// WaitReady polls the process's Ready URL until it answers 200, the process exits, ctx ends
// or timeout passes.
func (p *Proc) WaitReady(ctx context.Context, timeout time.Duration) error {
	run := p.current()
	if p.spec.Ready == "" || run == nil {
		return nil
	}
	return run.WaitHTTP(ctx, probeClient, p.spec.Ready, timeout, "ready")
}

// LogTail returns the last n lines of the process's log, indented.
func (p *Proc) LogTail(n int) string {
	run := p.current()
	if run == nil {
		return ""
	}
	return "  " + strings.ReplaceAll(run.LogTail(n), "\n", "\n  ")
}
