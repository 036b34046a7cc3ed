package child

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"time"
)

// Options are how Start runs a child.
type Options struct {
	// Env is the child's whole environment; nil gives it this process's.
	Env []string
	// Log is the file the child's stdout and stderr are appended to (created with Mode).
	Log string
	// Truncate empties Log first: a child started again on the same log (a retry) then
	// quotes only its own lines in errors.
	Truncate bool
	// Mode is Log's permissions when it is created; 0 gives 0644.
	Mode os.FileMode
	// Output, when not nil, gets a copy of the output too.
	Output io.Writer
	// Banner, when not empty, is written to the log first, on a line of its own (a restarted
	// child's log says where each run begins).
	Banner string
}

// Proc is a started child.
type Proc struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	exited  chan struct{} // closed when the process has exited
	err     error         // its exit status, once exited is closed
}

// Start starts bin with args as the child called name (in errors).
func Start(name, bin string, args []string, o Options) (*Proc, error) {
	flags, mode := os.O_CREATE|os.O_WRONLY|os.O_APPEND, o.Mode
	if o.Truncate {
		flags |= os.O_TRUNC
	}
	if mode == 0 {
		mode = 0o644
	}
	f, err := os.OpenFile(o.Log, flags, mode)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	if o.Banner != "" {
		fmt.Fprintln(f, o.Banner)
	}
	var w io.Writer = f
	if o.Output != nil {
		w = io.MultiWriter(f, o.Output)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = o.Env
	cmd.Stdout, cmd.Stderr = w, w
	setProcAttrs(cmd)
	p := &Proc{name: name, cmd: cmd, logPath: o.Log, exited: make(chan struct{})}
	started := make(chan error, 1)
	go func() { // owned by the process: it ends when the process does; Stop and Kill wait for it
		runtime.LockOSThread() // never unlocked: the thread ends with the child (package comment)
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		p.err = cmd.Wait()
		f.Close()
		close(p.exited)
	}()
	if err := <-started; err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	return p, nil
}

// Name is the child's name.
func (p *Proc) Name() string { return p.name }

// Pid is the process's id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// LogPath is the file the child's output goes to.
func (p *Proc) LogPath() string { return p.logPath }

// Exited is closed once the process has exited.
func (p *Proc) Exited() <-chan struct{} { return p.exited }

// Err is the process's exit status (nil: exit 0); read it once Exited is closed.
func (p *Proc) Err() error { return p.err }

// Alive reports whether the process has not exited yet.
func (p *Proc) Alive() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// Stop ends the process: SIGTERM, then SIGKILL after grace. It returns once the process has
// exited, and whether it had to be killed.
func (p *Proc) Stop(grace time.Duration) (killed bool) {
	if !p.Alive() {
		return false
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.exited:
		return false
	case <-t.C:
	}
	p.Kill()
	return true
}

// Kill ends the process at once, as a crash would, and returns once it has exited.
func (p *Proc) Kill() {
	_ = p.cmd.Process.Kill()
	<-p.exited // SIGKILL cannot be ignored; Wait returns promptly
}

// tailBytes bounds what LogTail reads of the end of a log.
const tailBytes = 16 << 10

// LogTail is the last n lines of the child's log (of its last 16 KiB), for error messages.
func (p *Proc) LogTail(n int) string {
	f, err := os.Open(p.logPath)
	if err != nil {
		return ""
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > tailBytes {
		_, _ = f.Seek(st.Size()-tailBytes, io.SeekStart)
	}
	b, _ := io.ReadAll(io.LimitReader(f, tailBytes))
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// failureLines is how many lines of the log Failure quotes.
const failureLines = 20

// Failure describes, for an error about the child: what went wrong, its exit status if it
// has exited, and the end of its log.
func (p *Proc) Failure(what string) error { return p.failure(what, nil) }

// failure is Failure, wrapping cause (when not nil) for errors.Is, and ErrAddrInUse when the
// child has exited and its log's end says a port it was to listen on was taken.
func (p *Proc) failure(what string, cause error) error {
	// Whether it has exited is read before its log, so that the log read is complete when
	// it has (the log of a child still running may grow after the read).
	exited, name := !p.Alive(), p.name
	tail := p.LogTail(failureLines)
	if exited {
		name = fmt.Sprintf("%s exited (%v)", p.name, p.err)
		if strings.Contains(tail, "address already in use") {
			cause = errors.Join(ErrAddrInUse, cause)
		}
	}
	msg := fmt.Sprintf("%s %s; its log (%s) ends:\n%s", name, what, p.logPath, tail)
	return &failureError{msg: msg, cause: cause}
}

// ErrAddrInUse is wrapped by the errors of Failure and WaitHTTP when the child exited
// because an address it was to listen on was taken ("address already in use" at its log's
// end): a port FreePort gave can be taken by another process before the child binds it, and
// the caller may start the child again on fresh ports.
var ErrAddrInUse = errors.New("an address the child was to listen on was taken")

// FreePort returns a port of 127.0.0.1 that was free at the time of the call, for a child to
// listen on (see ErrAddrInUse).
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// failureError is Failure's error.
type failureError struct {
	msg   string
	cause error
}

func (e *failureError) Error() string { return e.msg }
func (e *failureError) Unwrap() error { return e.cause }

// pollEvery is how often WaitHTTP asks.
const pollEvery = 50 * time.Millisecond

// WaitHTTP GETs url with client until it answers 200, the child exits, ctx ends or timeout
// passes; what names the state awaited in its errors ("ready", "healthy"), which wrap
// context.DeadlineExceeded after timeout and ctx's cause when ctx ended. A request in flight
// when the child exits is cancelled.
func (p *Proc) WaitHTTP(parent context.Context, client *http.Client, url string, timeout time.Duration, what string) error {
	ctx, cancel := context.WithTimeout(parent, timeout)
	defer cancel()
	probeCtx, stopProbe := context.WithCancel(ctx)
	watched := make(chan struct{})
	go func() { // owned by WaitHTTP, which waits for it below
		defer close(watched)
		select {
		case <-p.exited:
			stopProbe()
		case <-probeCtx.Done():
		}
	}()
	defer func() { stopProbe(); <-watched }()
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	var last string // the latest answer, not a request the end of the wait cut short
	for {
		got := probe(probeCtx, client, url)
		if got == "" {
			return nil
		}
		if last == "" || probeCtx.Err() == nil {
			last = got
		}
		select {
		case <-p.exited:
			return p.Failure("before it was " + what)
		case <-ctx.Done():
			if cause := context.Cause(parent); cause != nil {
				return p.failure(fmt.Sprintf("not %s at %s: the wait ended (%v; last: %s)", what, url, cause, last), cause)
			}
			return p.failure(fmt.Sprintf("not %s at %s within %s (%s)", what, url, timeout, last), context.DeadlineExceeded)
		case <-tick.C:
		}
	}
}

// probe GETs url and returns "" for a 200, else what it got.
func probe(ctx context.Context, client *http.Client, url string) string {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err.Error()
	}
	resp, err := client.Do(req)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // so that the connection is reused
	if resp.StatusCode == http.StatusOK {
		return ""
	}
	return resp.Status + ": " + string(bytes.TrimSpace(body))
}
