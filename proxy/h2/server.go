package h2

import (
	"errors"
	"fmt"
	"io"
	"net"
	"time"
)

// Handler serves the requests of a server connection.
//
// ServeStream is called on the connection's read loop when a request's header block has
// arrived: it must not block. It returns the upstream connection to relay the request to
// (with a stream reserved there by Pool.Take), the edit of the request's fields and the
// exchange's observer; the relay then starts at once, in the same batch of writes. Or it
// returns a nil upstream and answers itself, now or later and from any goroutine, with
// Stream.Respond, Stream.Relay or Stream.Reset; until then the request's body is kept,
// within the stream's window.
type Handler interface {
	ServeStream(st *Stream) (up *Conn, edit *Edit, obs Observer)
}

// NewServerConn returns the server side of an HTTP/2 connection a client made with prior
// knowledge (its first bytes are the client preface, which Serve reads), answered by h.
func NewServerConn(nc net.Conn, cfg Config, h Handler) *Conn {
	c := newConn(nc, cfg, true)
	c.h = h
	return c
}

// Serve reads the client's preface, sends this side's SETTINGS and serves the connection
// until it ends: the client closes it, a protocol error, Close, or Shutdown once its last
// stream is done. Every stream has failed when it returns; it closes the connection. It
// returns nil for an orderly end.
func (c *Conn) Serve() error {
	err := c.preface()
	if err == nil {
		err = c.readLoop()
	}
	c.endLoop(err)
	if errors.Is(err, io.EOF) || errors.Is(err, ErrConnClosed) || errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

func (c *Conn) preface() error {
	_ = c.nc.SetReadDeadline(time.Now().Add(c.cfg.PrefaceTimeout))
	b, err := c.br.Peek(len(clientPreface))
	if err != nil {
		return fmt.Errorf("http2: read the client preface: %w", err)
	}
	if string(b) != clientPreface {
		return ConnError{ErrCodeProtocol, "bad client preface"}
	}
	_, _ = c.br.Discard(len(clientPreface))
	_ = c.nc.SetReadDeadline(time.Time{})
	c.mu.Lock()
	c.writeSettingsLocked()
	c.flushLocked()
	c.mu.Unlock()
	return nil
}

// Shutdown starts a graceful close: a GOAWAY tells the client that no new stream will be
// served; the connection closes once its open streams are done (or at Close).
func (c *Conn) Shutdown() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.goAway || c.closed {
		return
	}
	c.goAway = true
	writeGoAway(c.bw, c.lastPeer, ErrCodeNo, "")
	c.flushLocked()
	if len(c.streams) == 0 {
		c.failLocked(ErrConnClosed)
	}
}

// Streams is the number of open streams.
func (c *Conn) Streams() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.streams)
}
