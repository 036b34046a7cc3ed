package child

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// Proc is a started process.
type Proc struct {
	cmd     *exec.Cmd
	logPath string
	exited  chan struct{} // closed when the process has exited
	err     error         // its exit status, once exited is closed
}

// Start starts bin with args, its environment the harness's plus GOTRACEBACK=all and env,
// its stdout and stderr in the file logPath (created).
func Start(bin string, args, env []string, logPath string) (*Proc, error) {
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = append(append(os.Environ(), "GOTRACEBACK=all"), env...)
	setProcAttrs(cmd)
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, err
	}
	p := &Proc{cmd: cmd, logPath: logPath, exited: make(chan struct{})}
	go func() { // owned by the process: it ends when the process does; Stop and Kill wait for it
		p.err = cmd.Wait()
		f.Close()
		close(p.exited)
	}()
	return p, nil
}

// Pid is the process's id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Exited is closed once the process has exited.
func (p *Proc) Exited() <-chan struct{} { return p.exited }

// Err is the process's exit status; read it once Exited is closed.
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

// Stop ends the process: SIGTERM, then SIGKILL after grace. It returns once it has exited.
func (p *Proc) Stop(grace time.Duration) {
	if !p.Alive() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		return
	case <-time.After(grace):
	}
	p.Kill()
}

// Kill ends the process at once, as a crash would, and returns once it has exited.
func (p *Proc) Kill() {
	_ = p.cmd.Process.Kill()
	<-p.exited // SIGKILL cannot be ignored; Wait returns promptly
}

// LogTail is the last 15 lines of the process's log, for error messages.
func (p *Proc) LogTail() string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 15 {
		lines = lines[len(lines)-15:]
	}
	return strings.Join(lines, "\n")
}

// Failure describes, for an error about process name: what went wrong, its exit status if it
// has exited, and the end of its log.
func (p *Proc) Failure(name, what string) error {
	if !p.Alive() {
		return fmt.Errorf("%s exited (%v) %s; its log ends:\n%s", name, p.err, what, p.LogTail())
	}
	return fmt.Errorf("%s: %s; its log ends:\n%s", name, what, p.LogTail())
}
