package detect

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"
)

// Defaults, as in linkerd2-proxy.
const (
	// DefaultTimeout is how long Peek waits for the client's first bytes to decide.
	DefaultTimeout = 10 * time.Second
	// DefaultMaxBytes is how many bytes Peek reads at most before it gives up on HTTP.
	DefaultMaxBytes = 8 << 10
)

// Config bounds Peek. The zero value of a field means its default.
type Config struct {
	Timeout  time.Duration
	MaxBytes int
}

// DefaultConfig returns a timeout of 10 s and a bound of 8 KiB.
func DefaultConfig() Config { return Config{Timeout: DefaultTimeout, MaxBytes: DefaultMaxBytes} }

// Result is what Peek found.
type Result struct {
	// Protocol is HTTP1, HTTP2 or Opaque, never NeedMore.
	Protocol Protocol
	// TimedOut reports that the client sent too little within the timeout, and
	// BoundReached that it sent Config.MaxBytes without completing a request line. In both
	// cases, and when the client stopped sending, what could still begin an HTTP/1 request
	// (empty lines alone too) is HTTP1 (as linkerd2-proxy takes a partial one) and anything
	// else Opaque: a request line too long for the bound, or one after many empty lines,
	// must not reach the application as opaque bytes, past the HTTP handling that checks
	// routes and strips l5d-client-id.
	TimedOut, BoundReached bool
	// Conn replays the bytes Peek read, then reads on from the connection.
	Conn *Conn
}

// pool holds DefaultMaxBytes read buffers; Peek copies out only what it read.
var pool = sync.Pool{New: func() any { b := make([]byte, DefaultMaxBytes); return &b }}

// Peek reads conn's first bytes until Detect decides, the client stops sending (end of
// stream after some bytes), the bound is reached or the timeout passes (then what could
// still begin a request is HTTP1, anything else Opaque: see Result), or ctx ends. It returns an error when
// the client closes before sending anything (io.EOF), when a read fails, or when ctx ends
// (ctx.Err()); the caller then normally closes conn, but Result.Conn is set even then and
// replays whatever was read, so nothing is lost. Peek clears conn's read deadline before
// it returns. It starts no goroutine that outlives it.
func Peek(ctx context.Context, conn net.Conn, cfg Config) (Result, error) {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = DefaultMaxBytes
	}
	var buf []byte
	if cfg.MaxBytes == DefaultMaxBytes {
		bp := pool.Get().(*[]byte)
		defer pool.Put(bp)
		buf = *bp
	} else {
		buf = make([]byte, cfg.MaxBytes)
	}

	if err := conn.SetReadDeadline(time.Now().Add(cfg.Timeout)); err != nil {
		return Result{Conn: &Conn{Conn: conn}}, fmt.Errorf("detect: set read deadline: %w", err)
	}
	res, n, err := readUntil(ctx, conn, buf)
	if derr := conn.SetReadDeadline(time.Time{}); derr != nil && err == nil {
		err = fmt.Errorf("detect: clear read deadline: %w", derr)
	}
	res.Conn = &Conn{Conn: conn, prefix: append([]byte(nil), buf[:n]...)}
	if err != nil {
		return Result{Conn: res.Conn}, err
	}
	return res, nil
}

// readUntil is read, cut short when ctx ends: it moves the read deadline into the past then,
// and waits for that to be done before it returns, so that the caller's clearing of the
// deadline comes last.
func readUntil(ctx context.Context, conn net.Conn, buf []byte) (Result, int, error) {
	if ctx.Done() == nil { // never ends: no watcher needed
		return read(conn, buf)
	}
	fired := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		defer close(fired)
		_ = conn.SetReadDeadline(time.Unix(1, 0)) // unblock the read now
	})
	res, n, err := read(conn, buf)
	if !stop() {
		<-fired
		err = ctx.Err()
	}
	return res, n, err
}

// undecided is the protocol of a prefix Detect could not decide on when no more comes: HTTP1
// when it could still begin an HTTP/1 request (empty lines alone included: a request may
// follow them, and must not reach the application as opaque bytes), else Opaque (nothing).
func undecided(prefix []byte) Protocol {
	if len(prefix) > 0 && Detect(prefix) == NeedMore {
		return HTTP1
	}
	return Opaque
}

// read fills buf from conn until Detect decides; it returns the result and the byte count.
func read(conn net.Conn, buf []byte) (Result, int, error) {
	n := 0
	for {
		m, err := conn.Read(buf[n:])
		n += m
		if m > 0 {
			if p := Detect(buf[:n]); p != NeedMore {
				return Result{Protocol: p}, n, nil
			}
			if n == len(buf) {
				return Result{Protocol: undecided(buf[:n]), BoundReached: true}, n, nil
			}
		}
		switch {
		case err == nil:
		case errors.Is(err, os.ErrDeadlineExceeded):
			return Result{Protocol: undecided(buf[:n]), TimedOut: true}, n, nil // or ctx ended: Peek tells
		case errors.Is(err, io.EOF) && n > 0:
			return Result{Protocol: undecided(buf[:n])}, n, nil // no more to come
		case errors.Is(err, io.EOF):
			return Result{}, 0, io.EOF
		default:
			return Result{}, 0, fmt.Errorf("detect: read: %w", err)
		}
	}
}
