package outbound

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/meridian-mesh/meridian/proxy/detect"
	"github.com/meridian-mesh/meridian/proxy/h2"
	"github.com/meridian-mesh/meridian/proxy/internal/handoff"
)

// serveConn takes an accepted connection: it reads the original destination; a connection
// detected as HTTP/1 goes to the lean HTTP/1.1 path, one detected as HTTP/2 to the lean
// HTTP/2 relay, an explicit one that is neither to the HTTP server (which refuses it); a transparent connection to an opaque port or
// target, or detected as opaque, becomes a tunnel to its original destination.
func (o *Outbound) serveConn(raw net.Conn, hl *handoff.Listener) {
	entry := o.conns.add(raw)
	if entry == nil {
		_ = raw.Close()
		return
	}
	cc := &clientConn{Conn: raw, raw: raw}
	od, err := o.origDst(raw)
	switch {
	case err != nil:
		o.log.Debug("no original destination: explicit", zap.Stringer("client", raw.RemoteAddr()), zap.Error(err))
	case od.IsValid() && od.Port() != 0 && !isListener(od, raw.LocalAddr()):
		cc.origDst = netip.AddrPortFrom(od.Addr().Unmap(), od.Port())
		cc.origAuth = cc.origDst.String()
	}

	// The target of the original destination says whether the port is opaque; an error here
	// (discovery unreachable) is not fatal for HTTP, whose requests resolve on their own.
	var t *target
	terr := errors.New("explicit connection")
	if cc.transparent() {
		t, terr = o.targets.acquire(o.ctx, cc.origAuth)
	}
	drop := func() {
		if terr == nil {
			t.release()
		}
	}
	if !o.opaque[cc.origDst.Port()] && (terr != nil || !t.opaque()) {
		res, err := detect.Peek(o.ctx, raw, detect.Config{Timeout: o.cfg.DetectTimeout})
		if err != nil {
			o.log.Debug("detect", zap.Stringer("client", raw.RemoteAddr()), zap.Error(err))
			drop()
			o.conns.remove(raw)
			_ = raw.Close()
			return
		}
		cc.Conn = res.Conn
		switch {
		case res.Protocol == detect.HTTP1:
			drop()
			o.serveH1(cc, entry, hl)
			return
		case res.Protocol == detect.HTTP2:
			drop()
			o.serveH2(cc, entry)
			return
		case !cc.transparent():
			drop()
			o.conns.remove(raw)
			o.handoff(hl, cc)
			return
		}
	}
	defer o.conns.remove(raw)
	if terr != nil {
		o.log.Debug("tcp: resolve", zap.String("authority", cc.origAuth), zap.Error(terr))
		refuse(raw)
		return
	}
	defer t.release()
	if !o.conns.tunnel(raw) {
		_ = raw.Close()
		return
	}
	defer o.conns.tunnelDone()
	o.proxyTCP(cc.Conn, raw, t)
}

// isListener reports whether the original destination is the listener itself (the
// connection came to it directly: an explicit-proxy client).
func isListener(od netip.AddrPort, local net.Addr) bool {
	la, ok := local.(*net.TCPAddr)
	if !ok {
		return false
	}
	l := la.AddrPort()
	return od.Port() == l.Port() && od.Addr().Unmap() == l.Addr().Unmap()
}

// handoff gives a connection to the HTTP server (closing it when the server is shutting
// down).
func (o *Outbound) handoff(hl *handoff.Listener, cc *clientConn) {
	if !hl.Handoff(cc) {
		_ = cc.Close()
	}
}

// refuse closes a client connection the proxy cannot serve with a reset (SO_LINGER 0), which
// the client sees as a refused or reset connection rather than an end of stream.
func refuse(c net.Conn) {
	if tc, ok := c.(interface{ SetLinger(int) error }); ok { // a *net.TCPConn, or rawio's
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}

// connKey is the context key of the *clientConn a request arrived on.
type connKey struct{}

// clientConn is a client connection as the HTTP server sees it.
type clientConn struct {
	net.Conn // the accepted connection, or a detect.Conn replaying the detected bytes
	raw      net.Conn
	// origDst is the original destination of a transparent connection; invalid for an
	// explicit one. origAuth is its String.
	origDst  netip.AddrPort
	origAuth string
	// memo remembers the last Host routed on this connection and its authority, so that
	// the requests of a keep-alive connection do not parse the same Host again.
	memo atomic.Pointer[hostMemo]
}

type hostMemo struct{ host, authority string }

func (c *clientConn) transparent() bool { return c.origDst.IsValid() }

// CloseWrite lets the HTTP server half-close the connection before closing it.
func (c *clientConn) CloseWrite() error {
	if cw, ok := c.raw.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errors.ErrUnsupported
}

// connState is what an accepted connection outside the HTTP server is doing.
type connState uint8

const (
	stateDetecting connState = iota // reading its first bytes, resolving its target
	stateIdle                       // a lean HTTP/1.1 connection between requests
	stateBusy                       // a lean HTTP/1.1 connection serving a request
	stateTunnel                     // copying bytes (opaque TCP, CONNECT, an upgrade)
	stateH2                         // served by the lean HTTP/2 relay
)

// connEntry is one connection in a connSet; its fields are guarded by the set's mutex.
type connEntry struct {
	state connState
	up    net.Conn // the lean path's upstream connection while a request uses it
	h2    *h2.Conn // the relay's server connection (stateH2)
}

// connSet holds the accepted connections the HTTP server does not own (those in detection,
// on the lean HTTP/1.1 path, and tunnels), so that shutdown can close them; and counts the
// tunnels, which shutdown lets run for the grace period.
type connSet struct {
	mu       sync.Mutex
	m        map[net.Conn]*connEntry
	draining bool // no new connection; idle ones close; no detected connection becomes a tunnel
	closed   bool // no hijacked connection becomes a tunnel either
	tunnels  tracker
}

// add registers a new connection; nil once draining.
func (s *connSet) add(c net.Conn) *connEntry {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.draining {
		return nil
	}
	if s.m == nil {
		s.m = map[net.Conn]*connEntry{}
	}
	e := &connEntry{}
	s.m[c] = e
	return e
}

// tunnel makes a registered connection a tunnel; false once draining (draining closed it).
// A true answer must be followed by tunnelDone.
func (s *connSet) tunnel(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.m[c]
	if !ok || s.draining || !s.tunnels.enter() {
		return false
	}
	e.state = stateTunnel
	return true
}

// addTunnel registers a hijacked connection as a tunnel (a request in flight may still
// start one while draining); false once closed. A true answer must be followed by
// tunnelDone and remove.
func (s *connSet) addTunnel(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || !s.tunnels.enter() {
		return false
	}
	if s.m == nil {
		s.m = map[net.Conn]*connEntry{}
	}
	s.m[c] = &connEntry{state: stateTunnel}
	return true
}

func (s *connSet) tunnelDone() { s.tunnels.exit() }

// idle marks a lean connection as waiting for its next request; false once draining (the
// caller closes it).
func (s *connSet) idle(e *connEntry) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	e.state = stateIdle
	return !s.draining
}

// busy marks a lean connection as serving a request.
func (s *connSet) busy(e *connEntry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e.state = stateBusy
}

// upstream records the upstream connection a lean request uses (nil when done), so that the
// hard stop closes it too; false (and up is closed) once closed.
func (s *connSet) upstream(e *connEntry, up net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed && up != nil {
		_ = up.Close()
		return false
	}
	e.up = up
	return true
}

// closeUpstream closes the upstream connection e's lean request uses now, if any (its client
// left: h1.Watch).
func (s *connSet) closeUpstream(e *connEntry) {
	s.mu.Lock()
	up := e.up
	s.mu.Unlock()
	if up != nil {
		_ = up.Close()
	}
}

// h2 marks a connection as served by the lean HTTP/2 relay; false once draining (the
// caller closes it).
func (s *connSet) h2(e *connEntry, c *h2.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.draining {
		return false
	}
	e.state, e.h2 = stateH2, c
	return true
}

func (s *connSet) isDraining() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.draining
}

func (s *connSet) remove(c net.Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, c)
}

// closeIdle stops new connections and closes those with nothing in flight: in detection, or
// lean ones between requests; HTTP/2 connections get a GOAWAY and close once their streams
// are done.
func (s *connSet) closeIdle() {
	s.mu.Lock()
	var h2s []*h2.Conn
	for _, e := range s.m {
		if e.state == stateH2 {
			h2s = append(h2s, e.h2)
		}
	}
	s.mu.Unlock()
	s.closeWhere(func(e *connEntry) bool { return e.state == stateDetecting || e.state == stateIdle }, false)
	for _, c := range h2s {
		c.Shutdown()
	}
}

// waitTunnels waits until no tunnel runs or ctx ends.
func (s *connSet) waitTunnels(ctx context.Context) { s.tunnels.waitIdle(ctx) }

// closeAll closes every connection left (and the lean path's upstream connections), and no
// tunnel starts after it.
func (s *connSet) closeAll() { s.closeWhere(func(*connEntry) bool { return true }, true) }

func (s *connSet) closeWhere(which func(*connEntry) bool, final bool) {
	s.mu.Lock()
	s.draining = true
	if final {
		s.closed = true
		s.tunnels.close()
	}
	var close []net.Conn
	for c, e := range s.m {
		if which(e) {
			close = append(close, c)
			if final && e.up != nil {
				close = append(close, e.up)
			}
		}
	}
	s.mu.Unlock()
	for _, c := range close {
		_ = c.Close()
	}
}

// tracker counts running work (requests, tunnels) so that shutdown can wait for it.
type tracker struct {
	mu     sync.Mutex
	n      int
	closed bool
	zero   chan struct{} // made by a waiter; closed when n reaches 0
}

// enter counts one more; false once closed.
func (t *tracker) enter() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false
	}
	t.n++
	return true
}

func (t *tracker) exit() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.n--
	if t.n == 0 && t.zero != nil {
		close(t.zero)
		t.zero = nil
	}
}

// waitIdle returns once the count is 0 or ctx ends.
func (t *tracker) waitIdle(ctx context.Context) {
	t.mu.Lock()
	if t.n == 0 {
		t.mu.Unlock()
		return
	}
	if t.zero == nil {
		t.zero = make(chan struct{})
	}
	ch := t.zero
	t.mu.Unlock()
	select {
	case <-ch:
	case <-ctx.Done():
	}
}

// close makes enter fail from now on.
func (t *tracker) close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed = true
}

// wait closes the tracker and waits for the count to reach 0 (the work was told to stop).
func (t *tracker) wait() {
	t.close()
	t.waitIdle(context.Background())
}
