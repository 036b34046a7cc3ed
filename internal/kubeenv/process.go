package kubeenv

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
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

// waitHealthy polls url with client until it answers 200, the process exits, or timeout.
// A process that lost a port it was given wraps child.ErrAddrInUse.
func (p *process) waitHealthy(ctx context.Context, client *http.Client, url string, timeout time.Duration) error {
	return p.WaitHTTP(ctx, client, url, timeout, "healthy")
}

// healthClient returns an HTTP client for health checks: with tlsCfg for the API server, plain
// for etcd.
func healthClient(tlsCfg *tls.Config) *http.Client {
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsCfg, DisableKeepAlives: true}}
}
