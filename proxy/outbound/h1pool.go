package outbound

import (
	"bufio"
	"context"
	"errors"
	"net"
	"sync"
	"time"

	"github.com/meridian-mesh/meridian/proxy/transportheader"
)

// upConn is an upstream HTTP/1.1 connection of the lean path, with its buffers.
type upConn struct {
	c      net.Conn
	br     *bufio.Reader
	bw     *bufio.Writer
	idleAt int64 // targets' clock, when it was put back
	reused bool  // it carried a request before
}

// staleAfter is how long a connection may sit idle before the lean path checks, before
// using it, that the upstream has not closed it meanwhile.
const staleAfter = time.Second

// h1pool is an endpoint's idle lean HTTP/1.1 connections, most recently used first out. It
// is bounded by Config.MaxIdlePerEndpoint; connections idle for Config.PoolIdleTimeout are
// closed (when taken, and by the janitor's sweep).
type h1pool struct {
	mu     sync.Mutex
	idle   []*upConn
	closed bool // the endpoint is retired: nothing goes back in
}

// conn returns an idle connection to e, or dials a new one (a *connectError when that
// fails).
func (e *endpoint) leanConn(ctx context.Context) (*upConn, error) {
	now := e.o.targets.now()
	for {
		uc := e.lean.take(now, int64(e.o.cfg.PoolIdleTimeout))
		if uc == nil {
			break
		}
		if now-uc.idleAt < int64(staleAfter) || !uc.stale() {
			return uc, nil
		}
		_ = uc.c.Close()
	}
	c, err := e.dial(ctx, transportheader.HTTP1)
	if err != nil {
		return nil, err
	}
	return &upConn{c: c, br: bufio.NewReaderSize(c, 4<<10), bw: bufio.NewWriterSize(c, 4<<10)}, nil
}

// stale reports whether the upstream closed (or wrote to) an idle connection: a read that
// must not wait answers at once.
func (uc *upConn) stale() bool {
	if uc.br.Buffered() > 0 {
		return true // an unsolicited response (a 408 before closing)
	}
	_ = uc.c.SetReadDeadline(time.Now())
	_, err := uc.br.Peek(1)
	_ = uc.c.SetReadDeadline(time.Time{})
	var ne net.Error
	return !(errors.As(err, &ne) && ne.Timeout())
}

func (p *h1pool) take(now, idleTimeout int64) *upConn {
	p.mu.Lock()
	defer p.mu.Unlock()
	for n := len(p.idle); n > 0; n = len(p.idle) {
		uc := p.idle[n-1]
		p.idle[n-1] = nil
		p.idle = p.idle[:n-1]
		if now-uc.idleAt < idleTimeout {
			return uc
		}
		_ = uc.c.Close()
	}
	return nil
}

// put returns a connection whose exchange completed cleanly; it is closed instead when the
// pool is full or closed.
func (p *h1pool) put(uc *upConn, now int64, maxIdle int) {
	uc.idleAt, uc.reused = now, true
	p.mu.Lock()
	if p.closed || len(p.idle) >= maxIdle {
		p.mu.Unlock()
		_ = uc.c.Close()
		return
	}
	p.idle = append(p.idle, uc)
	p.mu.Unlock()
}

// closeIdle closes the idle connections; with retire, nothing is pooled any more.
func (p *h1pool) closeIdle(retire bool) {
	p.mu.Lock()
	idle := p.idle
	p.idle = nil
	if retire {
		p.closed = true
	}
	p.mu.Unlock()
	for _, uc := range idle {
		_ = uc.c.Close()
	}
}

// sweep closes the connections idle for idleTimeout.
func (p *h1pool) sweep(now, idleTimeout int64) {
	p.mu.Lock()
	var old []*upConn
	keep := p.idle[:0]
	for _, uc := range p.idle {
		if now-uc.idleAt >= idleTimeout {
			old = append(old, uc)
		} else {
			keep = append(keep, uc)
		}
	}
	clear(p.idle[len(keep):])
	p.idle = keep
	p.mu.Unlock()
	for _, uc := range old {
		_ = uc.c.Close()
	}
}
