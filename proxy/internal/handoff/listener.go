package handoff

import (
	"net"
	"sync"
)

// Listener is a net.Listener whose connections are handed to it (Handoff) rather than
// accepted from a socket.
type Listener struct {
	addr net.Addr
	ch   chan net.Conn
	done chan struct{}
	once sync.Once
}

// New returns a Listener whose Addr is addr.
func New(addr net.Addr) *Listener {
	return &Listener{addr: addr, ch: make(chan net.Conn), done: make(chan struct{})}
}

// Accept returns the next connection handed off, or net.ErrClosed once the listener is
// closed.
func (l *Listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close stops Accept and Handoff; the connections handed off before are the server's.
func (l *Listener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

// Addr is the address given to New.
func (l *Listener) Addr() net.Addr { return l.addr }

// Handoff passes c to Accept; false, with c still the caller's, once the listener is
// closed.
func (l *Listener) Handoff(c net.Conn) bool {
	select {
	case l.ch <- c:
		return true
	case <-l.done:
		return false
	}
}
