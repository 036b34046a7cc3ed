package h2

import (
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

// NewClientConn starts the client side of an HTTP/2 connection over nc (prior knowledge:
// plaintext, or TLS that negotiated h2 or carries the transport header): it writes the
// preface and this side's SETTINGS. The caller runs Run on a goroutine it owns.
func NewClientConn(nc net.Conn, cfg Config) (*Conn, error) {
	c := newConn(nc, cfg, false)
	c.mu.Lock()
	defer c.mu.Unlock()
	_, _ = c.bw.WriteString(clientPreface)
	c.writeSettingsLocked()
	c.flushLocked()
	if c.closed {
		return nil, c.err
	}
	return c, nil
}

// Run reads the connection until it ends, then fails its streams and closes it. It returns
// nil for an orderly end (the server closed it, or Close).
func (c *Conn) Run() error {
	err := c.readLoop()
	c.endLoop(err)
	if errors.Is(err, io.EOF) || errors.Is(err, ErrConnClosed) || errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// reserve reserves a stream on a client connection that can open one now.
func (c *Conn) reserve() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.goAway || uint32(len(c.streams)+c.reserved) >= c.peerStreams {
		return false
	}
	c.reserved++
	return true
}

func (c *Conn) unreserve() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.reserved > 0 {
		c.reserved--
	}
}

// Idle reports whether c has had no stream since before t, or can no longer be used (a
// server's idle sweep shuts such a connection down).
func (c *Conn) Idle(t time.Time) bool { return c.idle(t) }

// idle reports a connection without streams since before t (or that cannot be used).
func (c *Conn) idle(t time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed || c.goAway || len(c.streams) == 0 && c.reserved == 0 && c.idleAt.Before(t)
}

// Pool holds the client connections to one upstream. It is safe for concurrent use.
type Pool struct {
	mu      sync.Mutex
	conns   []*Conn
	retired bool
}

// Take reserves a stream on a pooled connection that can open one now, and returns that
// connection (for Handler.ServeStream or Stream.Relay); nil when none can: the caller dials
// one, Adds it and Takes again.
func (p *Pool) Take() *Conn {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		if c.reserve() {
			return c
		}
	}
	return nil
}

// Add pools c; it leaves the pool when it ends. False (and c is closed) when the pool is
// retired.
func (p *Pool) Add(c *Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.retired {
		c.Close()
		return false
	}
	c.mu.Lock()
	c.onClose = p.remove
	c.mu.Unlock()
	p.conns = append(p.conns, c)
	return true
}

func (p *Pool) remove(c *Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, pc := range p.conns {
		if pc == c {
			p.conns = append(p.conns[:i], p.conns[i+1:]...)
			return
		}
	}
}

// CloseIdle closes the connections that have had no stream since before t (all idle ones
// for a t in the future); with retire, the pool takes no connection any more.
func (p *Pool) CloseIdle(t time.Time, retire bool) {
	p.mu.Lock()
	var idle []*Conn
	for _, c := range p.conns {
		if c.idle(t) {
			idle = append(idle, c)
		}
	}
	if retire {
		p.retired = true
	}
	p.mu.Unlock()
	for _, c := range idle {
		c.Close()
	}
}

// Close closes every connection and retires the pool.
func (p *Pool) Close() {
	p.mu.Lock()
	conns := append([]*Conn(nil), p.conns...)
	p.retired = true
	p.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}
