package accept

import (
	"context"
	"errors"
	"net"
	"time"
)

// The bounds of the backoff after a failed Accept.
const (
	minBackoff = 5 * time.Millisecond
	maxBackoff = time.Second
)

// Loop accepts connections on lis and hands each to serve (which must not block: it starts
// the connection's goroutine) until lis is closed or Accept fails with an error that retry
// does not accept. A failure retry accepts is reported to onRetry with the backoff that
// follows it: the backoff doubles from 5 ms to a second over consecutive failures, and
// starts again after a connection. Loop returns nil when lis was closed or ctx ended during
// a backoff, and otherwise the error it did not retry.
func Loop(ctx context.Context, lis net.Listener, retry func(error) bool, onRetry func(err error, backoff time.Duration), serve func(net.Conn)) error {
	var backoff time.Duration
	for {
		c, err := lis.Accept()
		if err == nil {
			backoff = 0
			serve(c)
			continue
		}
		if errors.Is(err, net.ErrClosed) {
			return nil
		}
		if !retry(err) {
			return err
		}
		backoff = min(max(2*backoff, minBackoff), maxBackoff)
		onRetry(err, backoff)
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil
		}
	}
}
