package kubeenv

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/meridian-mesh/meridian/internal/child"
)

// process is one running child: etcd or the API server.
type process struct{ *child.Proc }

// startProcess starts binary with args, its output appended to logPath (and copied to out
// when not nil).
func startProcess(name, binary string, args []string, logPath string, out io.Writer) (*process, error) {
	p, err := child.Start(name, binary, args, child.Options{Log: logPath, Output: out, Mode: 0o600})
	if err != nil {
		return nil, err
	}
	return &process{p}, nil
}

// stop ends the process: SIGTERM, then SIGKILL after grace. It returns once it has exited,
// with an error when it had to be killed.
func (p *process) stop(grace time.Duration) error {
	if p.Stop(grace) {
		return fmt.Errorf("%s did not stop within %s of SIGTERM and was killed", p.Name(), grace)
	}
	return nil
}

// errAddrInUse marks a start that failed because a port chosen free was taken meanwhile.
var errAddrInUse = errors.New("address already in use")

// waitHealthy polls url with client until it answers 200, the process exits, or timeout.
func (p *process) waitHealthy(ctx context.Context, client *http.Client, url string, timeout time.Duration) error {
	err := p.WaitHTTP(ctx, client, url, timeout, "healthy")
	if err != nil && !p.Alive() && strings.Contains(p.LogTail(20), "address already in use") {
		err = errors.Join(errAddrInUse, err)
	}
	return err
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
