package outbound

import (
	"bufio"
	"bytes"
	"io"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/meridian-mesh/meridian/proxy/detect"
	"github.com/meridian-mesh/meridian/proxy/httpproxy"
)

// The lean HTTP/1.1 path serves the common request, an HTTP/1.1 request in absolute-form or
// origin-form with at most maxLeanBody bytes of Content-Length body, without net/http:
// heads parsed in place, bodies relayed between bufio buffers, pooled upstream connections
// per endpoint. It allocates nothing per request once a connection and its target are warm.
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
	req   h1head
	res   h1head
	body  []byte

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
func (o *Outbound) serveH1(cc *clientConn, entry *connEntry, hl *connListener) {
	s := &h1session{o: o, cc: cc, entry: entry, br: bufio.NewReaderSize(cc.Conn, 4<<10), bw: bufio.NewWriterSize(cc.raw, 4<<10)}
	handedOff := false
	defer func() {
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
		o.conns.busy(entry)
		_ = cc.raw.SetReadDeadline(time.Now().Add(o.cfg.DetectTimeout)) // the head's deadline
		err := readHead(s.br, &s.req, o.cfg.MaxHeaderBytes)
		if err == nil {
			err = s.req.parseRequest()
		}
		if err == nil && !s.lean() {
			err = errNotLean
		}
		if err == nil {
			err = s.route()
		}
		if err == errNotLean || err == errHeadTooLarge {
			_ = cc.raw.SetReadDeadline(time.Time{})
			handedOff = true
			s.handOff(hl)
			return
		}
		if err != nil {
			o.log.Debug("http/1: read request", zap.Stringer("client", cc.raw.RemoteAddr()), zap.Error(err))
			return
		}
		if n := s.req.contentLength; n > 0 {
			if cap(s.body) < int(n) {
				s.body = make([]byte, maxLeanBody)
			}
			if _, err := io.ReadFull(s.br, s.body[:n]); err != nil {
				return
			}
		}
		_ = cc.raw.SetReadDeadline(time.Time{})
		if !o.serveLean(s) || s.req.close {
			return
		}
	}
}

// lean reports whether the lean path takes the request just parsed.
func (s *h1session) lean() bool { return s.req.lean() }

// lean reports whether the lean path takes a parsed request head.
func (r *h1head) lean() bool {
	return r.minor == 1 && r.hosts == 1 && !r.hasTE && !r.upgrade && !r.expect && !r.grpc &&
		r.contentLength <= maxLeanBody && string(r.method) != "CONNECT"
}

// handOff gives the connection to net/http's server, replaying the request head read and
// whatever else is buffered.
func (s *h1session) handOff(hl *connListener) {
	replay := make([]byte, 0, len(s.req.raw)+s.br.Buffered())
	replay = append(replay, s.req.raw...)
	b, _ := s.br.Peek(s.br.Buffered())
	replay = append(replay, b...)
	s.o.conns.remove(s.cc.raw)
	s.o.handoff(hl, &clientConn{Conn: detect.NewConn(s.cc.Conn, replay), raw: s.cc.raw,
		origDst: s.cc.origDst, origAuth: s.cc.origAuth})
}

// route finds the request's authority, by the same rules as the net/http path (see
// Outbound.route); errNotLean for anything it does not route itself (net/http answers it).
func (s *h1session) route() error {
	r := &s.req
	s.absolute = false
	switch {
	case len(r.target) > 0 && r.target[0] == '/' || string(r.target) == "*":
		s.hostBytes, s.path = r.host, r.target
	case len(r.target) > 7 && fold(r.target[:7], "http://"):
		rest := r.target[7:]
		end := bytes.IndexAny(rest, "/?")
		if end < 0 {
			end = len(rest)
		}
		if end == 0 || bytes.ContainsAny(rest, "@#") {
			return errNotLean
		}
		s.hostBytes, s.path, s.absolute = rest[:end], rest[end:], true
	default:
		return errNotLean
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
		return errNotLean
	}
	s.memoRaw, s.memoAbsolute = append(s.memoRaw[:0], s.hostBytes...), s.absolute
	s.memoAuthority = a.String()
	s.memoCluster = s.o.isClusterName(raw)
	return nil
}

// writeError answers a request the proxy could not forward: plain text, the reason in
// l5d-proxy-error. The request body was read, so the connection may stay open.
func (s *h1session) writeError(status int, msg string) {
	msg = sanitize(msg)
	w := s.bw
	_, _ = w.WriteString("HTTP/1.1 ")
	_, _ = w.WriteString(strconv.Itoa(status))
	_ = w.WriteByte(' ')
	_, _ = w.WriteString(statusText(status))
	_, _ = w.WriteString("\r\nContent-Type: text/plain; charset=utf-8\r\nL5d-Proxy-Error: ")
	_, _ = w.WriteString(msg)
	_, _ = w.WriteString("\r\nContent-Length: ")
	_, _ = w.WriteString(strconv.Itoa(len(msg) + 1))
	if s.req.close {
		_, _ = w.WriteString("\r\nConnection: close")
	}
	_, _ = w.WriteString("\r\n\r\n")
	_, _ = w.WriteString(msg)
	_ = w.WriteByte('\n')
	_ = w.Flush()
}

func statusText(code int) string {
	switch code {
	case 502:
		return "Bad Gateway"
	case 503:
		return "Service Unavailable"
	case 504:
		return "Gateway Timeout"
	}
	return "Error"
}

// sanitize keeps a message fit for a header value.
func sanitize(s string) string {
	s = short(s)
	if !bytes.ContainsAny([]byte(s), "\r\n\x00") {
		return s
	}
	b := []byte(s)
	for i, c := range b {
		if c < ' ' && c != '\t' {
			b[i] = ' '
		}
	}
	return string(b)
}
