package kubeenv

import (
	"context"
	"crypto/tls"
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

// process is one running child: etcd or the API server. Its output goes to its log file
// (and to out, when set).
type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	exited  chan struct{} // closed once the process has exited
	err     error         // its exit status, once exited is closed
}

// startProcess starts binary with args, its output appended to logPath (and copied to out
// when not nil).
func startProcess(name, binary string, args []string, logPath string, out io.Writer) (*process, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	var w io.Writer = f
	if out != nil {
		w = io.MultiWriter(f, out)
	}
	cmd := exec.Command(binary, args...)
	cmd.Stdout, cmd.Stderr = w, w
	setProcAttrs(cmd)
	p := &process{name: name, cmd: cmd, logPath: logPath, exited: make(chan struct{})}
	// Pdeathsig fires when the thread that forked the child exits, and Go ends a thread when
	// a goroutine locked to it returns. So the child is forked and waited for from a goroutine
	// locked to its thread for as long as the child lives: no other goroutine runs there, and
	// the thread ends only after the child.
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
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

// pid returns the process id.
func (p *process) pid() int { return p.cmd.Process.Pid }

// stop ends the process: SIGTERM, then SIGKILL after grace. It returns once it has exited,
// with an error when it had to be killed.
func (p *process) stop(grace time.Duration) error {
	select {
	case <-p.exited:
		return nil
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.exited:
		return nil
	case <-t.C:
	}
	_ = p.cmd.Process.Kill()
	<-p.exited // SIGKILL cannot be ignored: Wait returns promptly
	return fmt.Errorf("%s did not stop within %s of SIGTERM and was killed", p.name, grace)
}

// tail returns the last lines of the process's log, for error messages.
func (p *process) tail() string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 20 {
		lines = lines[len(lines)-20:]
	}
	return strings.Join(lines, "\n")
}

// errAddrInUse marks a start that failed because a port chosen free was taken meanwhile.
var errAddrInUse = errors.New("address already in use")

// waitHealthy polls url with client until it answers 200, the process exits, or timeout.
func (p *process) waitHealthy(ctx context.Context, client *http.Client, url string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if resp, err := client.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-p.exited:
			tail := p.tail()
			err := fmt.Errorf("%s exited while starting (%v); its log (%s) ends:\n%s", p.name, p.err, p.logPath, tail)
			if strings.Contains(tail, "address already in use") {
				err = errors.Join(errAddrInUse, err)
			}
			return err
		case <-ctx.Done():
			return fmt.Errorf("%s not healthy at %s within %s: %w; its log (%s) ends:\n%s", p.name, url, timeout, ctx.Err(), p.logPath, p.tail())
		case <-tick.C:
		}
	}
}

// freePort returns a port of 127.0.0.1 that is free at the time of the call.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// healthClient returns an HTTP client for health checks: with tlsCfg for the API server, plain
// for etcd.
func healthClient(tlsCfg *tls.Config) *http.Client {
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsCfg, DisableKeepAlives: true}}
}
