package proxy

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"
)

// Await waits until the proxy whose admin server listens on this host's port is ready (its
// /ready answers 200), for at most timeout. A pod whose proxy is not a native sidecar runs it
// as the proxy container's postStart hook, so that the kubelet starts the application once
// its proxy can carry its traffic (linkerd2's linkerd-await).
func Await(ctx context.Context, port int, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	url := "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) + "/ready"
	client := &http.Client{Timeout: time.Second}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	last := "no answer yet"
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = resp.Status
		} else if ctx.Err() == nil {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the proxy at %s was not ready within %s (last: %s)", url, timeout, last)
		case <-tick.C:
		}
	}
}
