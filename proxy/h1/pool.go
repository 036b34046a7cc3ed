package h1

import (
	"bufio"
	"errors"
	"net"
	"sync"
	"time"
)

// Conn is an upstream keep-alive connection with its buffers.
type Conn struct {
	C      net.Conn
	R      *bufio.Reader
	W      *bufio.Writer
	IdleAt int64 // the pool's clock when it was put back
	Reused bool  // it carried a request before
}

// NewConn wraps c with 4 KiB buffers.
func NewConn(c net.Conn) *Conn {
	return &Conn{C: c, R: bufio.NewReaderSize(c, 4<<10), W: bufio.NewWriterSize(c, 4<<10)}
}

// StaleAfter is how long a connection may sit idle before its user checks, with Stale,
// that the upstream has not closed it meanwhile.
const StaleAfter = time.Second

// Stale reports whether the upstream closed (or wrote to) an idle connection: a read that
// must not wait answers at once.
func (uc *Conn) Stale() bool {
	if uc.R.Buffered() > 0 {
		return true // an unsolicited response (a 408 before closing)
	}
	_ = uc.C.SetReadDeadline(time.Now())
	_, err := uc.R.Peek(1)
	_ = uc.C.SetReadDeadline(time.Time{})
	var ne net.Error
	return !(errors.As(err, &ne) && ne.Timeout())
}

// Pool is one upstream's idle keep-alive connections, most recently used first out. Its
// clock is the caller's (any monotonic nanoseconds); Put bounds it, and connections idle for
// the caller's timeout are closed when taken and by Sweep. It is safe for concurrent use.
type Pool struct {
	mu     sync.Mutex
	idle   []*Conn
	closed bool // retired: nothing goes back in
}

// Take returns the most recently used idle connection, closing those idle for idleTimeout;
// nil when there is none.
func (p *Pool) Take(now, idleTimeout int64) *Conn {
	p.mu.Lock()
	defer p.mu.Unlock()
	for n := len(p.idle); n > 0; n = len(p.idle) {
		uc := p.idle[n-1]
		p.idle[n-1] = nil
		p.idle = p.idle[:n-1]
		if now-uc.IdleAt < idleTimeout {
			return uc
		}
		_ = uc.C.Close()
	}
	return nil
}

// Put returns a connection whose exchange completed cleanly; it is closed instead when the
// pool holds maxIdle already or is retired.
func (p *Pool) Put(uc *Conn, now int64, maxIdle int) {
	uc.IdleAt, uc.Reused = now, true
	p.mu.Lock()
	if p.closed || len(p.idle) >= maxIdle {
		p.mu.Unlock()
		_ = uc.C.Close()
		return
	}
	p.idle = append(p.idle, uc)
	p.mu.Unlock()
}

// CloseIdle closes the idle connections; with retire, nothing is pooled any more.
func (p *Pool) CloseIdle(retire bool) {
	p.mu.Lock()
	idle := p.idle
	p.idle = nil
	if retire {
		p.closed = true
	}
	p.mu.Unlock()
	for _, uc := range idle {
		_ = uc.C.Close()
	}
}

// Sweep closes the connections idle for idleTimeout.
func (p *Pool) Sweep(now, idleTimeout int64) {
	p.mu.Lock()
	var old []*Conn
	keep := p.idle[:0]
	for _, uc := range p.idle {
		if now-uc.IdleAt >= idleTimeout {
			old = append(old, uc)
		} else {
			keep = append(keep, uc)
		}
	}
	clear(p.idle[len(keep):])
	p.idle = keep
	p.mu.Unlock()
	for _, uc := range old {
		_ = uc.C.Close()
	}
}
