package h1

import (
	"bufio"
	"errors"
	"net"
	"os"
	"sync"
	"time"
)

// ErrClientGone is the error of an exchange whose client closed its connection while the
// request waited for the upstream's response head (Watch).
var ErrClientGone = errors.New("the client closed the connection before the response")

// WatchDelay is how long a request waits for its response head before Watch starts looking
// at the client's connection: a request answered sooner costs a timer's reset and stop.
const WatchDelay = time.Second

// Watch notices a client that goes away while its request waits for the upstream's response
// head (a long poll the client gave up on), so that the caller closes the upstream connection
// instead of holding it until the upstream answers, as linkerd2-proxy drops a request whose
// client left. A Watch belongs to one client connection and is reused for its requests:
// Arm after the request was sent whole, Disarm once the response head is read (or its read
// failed). Only when the head takes longer than WatchDelay does it read the client's
// connection, on a goroutine of its own that Disarm stops (a read deadline in the past) and
// waits for. What that read returns stays in the client's bufio.Reader: a pipelined request
// is not lost.
type Watch struct {
	conn  net.Conn
	br    *bufio.Reader
	gone  func() // called on the watcher's goroutine when the client went away
	timer *time.Timer

	mu       sync.Mutex
	state    int           // watchIdle, watchArmed or watchReading
	done     chan struct{} // closed when the reading goroutine returns
	wentAway bool
}

const (
	watchIdle = iota
	watchArmed
	watchReading
)

// NewWatch returns a Watch of the client connection conn read through br; gone is called
// (once per request at most, on another goroutine) when the client goes away while armed:
// it should close the upstream connection, which makes the caller's read of the response
// head fail.
func NewWatch(conn net.Conn, br *bufio.Reader, gone func()) *Watch {
	w := &Watch{conn: conn, br: br, gone: gone}
	w.timer = time.AfterFunc(time.Hour, w.fire)
	w.timer.Stop()
	return w
}

// Arm starts watching for the request just sent. A client that already sent more (a
// pipelined request; empty lines do not count, DiscardEmptyLines drops them) is still
// there: nothing is watched.
func (w *Watch) Arm() {
	if !DiscardEmptyLines(w.br) {
		return
	}
	w.mu.Lock()
	w.state, w.wentAway = watchArmed, false
	w.mu.Unlock()
	w.timer.Reset(WatchDelay)
}

func (w *Watch) fire() {
	w.mu.Lock()
	if w.state != watchArmed {
		w.mu.Unlock()
		return
	}
	w.state = watchReading
	done := make(chan struct{})
	w.done = done
	w.mu.Unlock()
	go func() { // owned by the Watch: Disarm waits for it
		defer close(done)
		_, err := w.br.Peek(1)
		if err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
			return // the client sent more, or Disarm stopped the read
		}
		w.mu.Lock()
		w.wentAway = true
		w.mu.Unlock()
		w.gone()
	}()
}

// Disarm stops watching, and waits for the watcher's read if one started. It reports
// whether the client went away meanwhile (the caller then answers nothing and closes the
// client connection).
func (w *Watch) Disarm() (gone bool) {
	w.mu.Lock()
	switch w.state {
	case watchIdle:
		w.mu.Unlock()
		return false
	case watchArmed:
		w.state = watchIdle
		w.mu.Unlock()
		w.timer.Stop()
		return false
	}
	w.state = watchIdle
	done := w.done
	w.mu.Unlock()
	_ = w.conn.SetReadDeadline(time.Now())
	<-done
	_ = w.conn.SetReadDeadline(time.Time{})
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.wentAway
}

// Stop releases the Watch's timer once its connection is done; a Watch is disarmed then.
func (w *Watch) Stop() {
	w.Disarm()
	w.timer.Stop()
}
