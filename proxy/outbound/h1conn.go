package outbound

import (
	"bufio"
	"bytes"
	"io"
	"time"

	"go.uber.org/zap"

	"github.com/meridian-mesh/meridian/proxy/detect"
	"github.com/meridian-mesh/meridian/proxy/h1"
	"github.com/meridian-mesh/meridian/proxy/httpproxy"
	"github.com/meridian-mesh/meridian/proxy/internal/handoff"
)

// The lean HTTP/1.1 path serves the common request, an HTTP/1.1 request in absolute-form or
// origin-form with at most maxLeanBody bytes of Content-Length body, without net/http:
// heads parsed in place, bodies relayed between bufio buffers, pooled upstream connections
// per endpoint (package proxy/h1). It allocates nothing per request once a connection and its target are warm.
// Any other request (CONNECT, an upgrade, Expect, a chunked or larger body, HTTP/1.0, gRPC's
// content type, a head it does not parse exactly) is handed with the rest of its connection, replaying every
// byte read, to net/http's server, which serves it as it serves HTTP/2.

// maxLeanBody bounds the request body the lean path buffers; a larger one goes to net/http,
// which streams it.
const maxLeanBody = 16 << 10

// h1session is the state of one client connection on the lean path, reused by its requests.
type h1session struct {
	o     *Outbound
	cc    *clientConn
	entry *connEntry
	br    *bufio.Reader
	bw    *bufio.Writer
	req   h1.Head
	res   h1.Head
	body  []byte

	// watch notices the client leaving while a request waits for its response head, and
	// closes the upstream connection that request uses (entry's).
	watch *h1.Watch

	// The request's route: its authority (a string that outlives the request), the bytes
	// naming it in the request (the Host field, or the absolute-form URI's authority) and the
	// origin-form target.
	authority string
	hostBytes []byte
	path      []byte
	absolute  bool

	// memo remembers the last naming bytes of the connection and their authority.
	memoRaw       []byte
	memoAbsolute  bool
	memoAuthority string
	memoCluster   bool
}

// serveH1 serves a client connection on the lean path until it closes, must close, or hands
// a request to net/http.
func (o *Outbound) serveH1(cc *clientConn, entry *connEntry, hl *handoff.Listener) {
	s := &h1session{o: o, cc: cc, entry: entry, br: bufio.NewReaderSize(cc.Conn, 4<<10), bw: bufio.NewWriterSize(cc.raw, 4<<10)}
	s.watch = h1.NewWatch(cc.raw, s.br, func() { o.conns.closeUpstream(entry) })
	handedOff := false
	defer func() {
		s.watch.Stop()
		if !handedOff {
			o.conns.remove(cc.raw)
			_ = cc.raw.Close()
		}
	}()
	for {
		if !o.conns.idle(entry) {
			return // draining
		}
		if _, err := s.br.Peek(1); err != nil {
			return // the client closed (or draining closed it)
		}
		if h1.DiscardEmptyLines(s.br) {
			continue // only empty lines (after a POST body): still waiting for a request
		}
		o.conns.busy(entry)
		_ = cc.raw.SetReadDeadline(time.Now().Add(o.cfg.DetectTimeout)) // the head's deadline
		err := h1.ReadHead(s.br, &s.req, o.cfg.MaxHeaderBytes)
		if err == nil {
			err = s.req.ParseRequest()
		}
		if err == nil && !s.req.Simple(maxLeanBody) {
			err = h1.ErrNotLean
		}
		if err == nil {
			err = s.route()
		}
		if err == h1.ErrNotLean || err == h1.ErrHeadTooLarge {
			_ = cc.raw.SetReadDeadline(time.Time{})
			handedOff = true
			s.handOff(hl)
			return
		}
		if err != nil {
			o.log.Debug("http/1: read request", zap.Stringer("client", cc.raw.RemoteAddr()), zap.Error(err))
			return
		}
		if n := s.req.ContentLength; n > 0 {
			if cap(s.body) < int(n) {
				s.body = make([]byte, maxLeanBody)
			}
			if _, err := io.ReadFull(s.br, s.body[:n]); err != nil {
				return
			}
		}
		_ = cc.raw.SetReadDeadline(time.Time{})
		if !o.serveLean(s) || s.req.Close {
			return
		}
	}
}

// handOff gives the connection to net/http's server, replaying the request head read and
// whatever else is buffered.
func (s *h1session) handOff(hl *handoff.Listener) {
	replay := make([]byte, 0, len(s.req.Raw)+s.br.Buffered())
	replay = append(replay, s.req.Raw...)
	b, _ := s.br.Peek(s.br.Buffered())
	replay = append(replay, b...)
	s.o.conns.remove(s.cc.raw)
	s.o.handoff(hl, &clientConn{Conn: detect.NewConn(s.cc.Conn, replay), raw: s.cc.raw,
		origDst: s.cc.origDst, origAuth: s.cc.origAuth})
}

// route finds the request's authority, by the same rules as the net/http path (see
// Outbound.route); h1.ErrNotLean for anything it does not route itself (net/http answers it).
func (s *h1session) route() error {
	var ok bool
	if s.hostBytes, s.path, s.absolute, ok = s.req.SplitTarget(); !ok {
		return h1.ErrNotLean
	}
	if s.memoRaw == nil || s.absolute != s.memoAbsolute || !bytes.Equal(s.hostBytes, s.memoRaw) {
		if err := s.remember(); err != nil {
			return err
		}
	}
	switch {
	case !s.cc.transparent() || s.absolute || s.memoCluster:
		s.authority = s.memoAuthority
	default:
		s.authority = s.cc.origAuth
	}
	return nil
}

// remember normalises new naming bytes into the memo.
func (s *h1session) remember() error {
	raw := string(s.hostBytes)
	port := uint16(80)
	if s.cc.transparent() && !s.absolute {
		port = s.cc.origDst.Port()
	}
	a, err := httpproxy.ParseAuthority(raw, port)
	if err != nil {
		return h1.ErrNotLean
	}
	s.memoRaw, s.memoAbsolute = append(s.memoRaw[:0], s.hostBytes...), s.absolute
	s.memoAuthority = a.String()
	s.memoCluster = s.o.isClusterName(raw)
	return nil
}

// writeError answers a request the proxy could not forward (h1.WriteError). The request
// body was read, so the connection may stay open.
func (s *h1session) writeError(status int, msg string) {
	_ = h1.WriteError(s.bw, status, msg, s.req.Close)
}
