package inbound

import (
	"bufio"
	"bytes"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
	"unsafe"

	"go.uber.org/zap"

	"github.com/meridian-mesh/meridian/proxy/detect"
	"github.com/meridian-mesh/meridian/proxy/h1"
	"github.com/meridian-mesh/meridian/proxy/inbound/policy"
	"github.com/meridian-mesh/meridian/proxy/metrics"
)

// The lean HTTP/1.1 path serves the common request without net/http, on the codec of
// proxy/h1: an HTTP/1.1 request in origin-form with at most maxLeanBody bytes of
// Content-Length body, whose path needs no unescaping. It authorizes it like serveRequest,
// strips any l5d-client-id and sets the client's, and forwards it over pooled keep-alive
// connections to the application. Any other request (an upgrade, Expect, a chunked or
// larger body, HTTP/1.0, gRPC, l5d-orig-proto, a head it does not parse exactly) is handed
// with the rest of its connection, replaying every byte read, to net/http's server.

// maxLeanBody bounds the request body the lean path buffers; a larger one goes to net/http,
// which streams it.
const maxLeanBody = 16 << 10

// h1session is the state of one client connection on the lean path, reused by its requests.
type h1session struct {
	i      *Inbound
	tc     *trackedConn // the socket, in the registry
	s      *session
	port   *policy.Port
	target string   // the application's address
	pool   *h1.Pool // idle connections to it
	br     *bufio.Reader
	bw     *bufio.Writer
	req    h1.Head
	res    h1.Head
	body   []byte
	idLine []byte // "l5d-client-id: <identity>\r\n", nil without a client identity

	// watch notices the client leaving while a request waits for its response head, and
	// closes the connection to the application that request uses (tc's upstream).
	watch *h1.Watch

	// The request's parts for route matching (path and query alias req's buffer).
	path, query []byte

	// memo remembers the last Host of the connection as a string (host), and the route
	// metrics of the last authority and server they were looked up for.
	memoHost   []byte
	memoAuth   string
	memoRMAuth string
	memoSrv    string
	memoRM     *metrics.Route

	rm    *metrics.Route // the request's, until its response is counted (record)
	start time.Time
}

// serveH1 serves a connection on the lean path until it closes, must close, or hands a
// request to net/http.
func (i *Inbound) serveH1(tc *trackedConn, s *session, port *policy.Port, target string) {
	ls := &h1session{i: i, tc: tc, s: s, port: port, target: target, pool: i.pools.get(target),
		br: bufio.NewReaderSize(s.conn, 4<<10), bw: bufio.NewWriterSize(s.conn, 4<<10)}
	if s.client.Identity != "" {
		ls.idLine = []byte("L5d-Client-Id: " + s.client.Identity + "\r\n")
	}
	ls.watch = h1.NewWatch(s.conn, ls.br, tc.closeUpstream)
	handedOff := false
	defer func() {
		ls.watch.Stop()
		i.lean.remove(tc)
		if !handedOff {
			_ = s.conn.Close()
		}
	}()
	for {
		if !i.lean.idle(tc) {
			return // draining
		}
		if ls.br.Buffered() == 0 {
			_ = s.conn.SetReadDeadline(time.Now().Add(i.cfg.IdleTimeout))
		}
		if _, err := ls.br.Peek(1); err != nil {
			return // the client closed, stayed idle for IdleTimeout (or draining closed it)
		}
		if h1.DiscardEmptyLines(ls.br) {
			continue // only empty lines (after a POST body): still waiting for a request
		}
		i.lean.busy(tc)
		_ = s.conn.SetReadDeadline(time.Now().Add(i.cfg.DetectTimeout)) // the head's deadline
		err := ls.readRequest()
		if err == h1.ErrNotLean || err == h1.ErrHeadTooLarge {
			_ = s.conn.SetReadDeadline(time.Time{})
			handedOff = true
			ls.handOff()
			return
		}
		if err != nil {
			i.log.Debug("inbound: http/1: read request", zap.Stringer("client", s.client.Addr), zap.Error(err))
			return
		}
		_ = s.conn.SetReadDeadline(time.Time{})
		if !ls.serve() || ls.req.Close {
			return
		}
	}
}

// readRequest reads the next request head and its body; h1.ErrNotLean for a request the
// lean path does not take.
func (ls *h1session) readRequest() error {
	r := &ls.req
	if err := h1.ReadHead(ls.br, r, maxHeaderBytes); err != nil {
		return err
	}
	if err := r.ParseRequest(); err != nil {
		return err
	}
	if !r.Simple(maxLeanBody) || !ls.split() {
		return h1.ErrNotLean
	}
	for i := range r.Fields {
		if h1.Fold(r.Fields[i].Name, "l5d-orig-proto") {
			return h1.ErrNotLean
		}
	}
	r.Drop("l5d-client-id")
	if n := r.ContentLength; n > 0 {
		if cap(ls.body) < int(n) {
			ls.body = make([]byte, maxLeanBody)
		}
		if _, err := io.ReadFull(ls.br, ls.body[:n]); err != nil {
			return err
		}
	}
	return nil
}

// maxHeaderBytes bounds a request head on the lean path; a larger one goes to net/http
// (whose bound is 1 MiB).
const maxHeaderBytes = 64 << 10

// split takes the path and query of an origin-form target whose path needs no unescaping.
func (ls *h1session) split() bool {
	t := ls.req.Target
	if len(t) == 0 || t[0] != '/' {
		return false // absolute-form, authority-form, "*": net/http
	}
	ls.path, ls.query = t, nil
	if q := bytes.IndexByte(t, '?'); q >= 0 {
		ls.path, ls.query = t[:q], t[q+1:]
	}
	return bytes.IndexByte(ls.path, '%') < 0
}

// handOff gives the connection to net/http's server, replaying the request head read and
// whatever else is buffered.
func (ls *h1session) handOff() {
	replay := make([]byte, 0, len(ls.req.Raw)+ls.br.Buffered())
	replay = append(replay, ls.req.Raw...)
	b, _ := ls.br.Peek(ls.br.Buffered())
	replay = append(replay, b...)
	s := *ls.s
	s.conn = detect.NewConn(ls.s.conn, replay)
	ls.i.serveNetHTTP(&s, ls.port, ls.target)
}

// routeMetrics returns the route metrics of the request's authority (request's host) and
// server srv.
func (ls *h1session) routeMetrics(srv string) *metrics.Route {
	if ls.memoRM == nil || ls.memoSrv != srv || ls.memoRMAuth != ls.memoAuth {
		ls.memoRMAuth, ls.memoSrv = ls.memoAuth, srv
		ls.memoRM = ls.i.metrics.Route(metrics.Labels{Direction: "inbound", Authority: ls.memoAuth, TLS: ls.s.tlsLabel(),
			ClientID: ls.s.client.Identity, SrvName: srv})
	}
	return ls.memoRM
}

// request is the policy's view of the request just read, whose Host it also keeps as a
// string (memoAuth, made anew only when it differs from the connection's last). Its other
// strings alias the session's buffers: it is valid until the next read.
func (ls *h1session) request() policy.Request {
	if host := ls.req.Host; !bytes.Equal(host, ls.memoHost) {
		ls.memoHost, ls.memoAuth = append(ls.memoHost[:0], host...), string(host)
	}
	return policy.Request{Method: method(ls.req.Method), Host: ls.memoAuth, Path: view(ls.path),
		RawQuery: view(ls.query), Header: leanHeader{&ls.req}}
}

// view is b as a string without a copy. The string aliases b: it must not outlive b's
// contents (policy matching keeps none of its strings).
func view(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// method interns the common methods.
func method(b []byte) string {
	switch string(b) {
	case http.MethodGet:
		return http.MethodGet
	case http.MethodPost:
		return http.MethodPost
	case http.MethodPut:
		return http.MethodPut
	case http.MethodDelete:
		return http.MethodDelete
	case http.MethodHead:
		return http.MethodHead
	case http.MethodPatch:
		return http.MethodPatch
	case http.MethodOptions:
		return http.MethodOptions
	}
	return string(b)
}

// leanHeader gives route matching the request's header fields (only routes with header
// matches read them: the values are copied then).
type leanHeader struct{ h *h1.Head }

func (l leanHeader) Values(name string) []string {
	var out []string
	for i := range l.h.Fields {
		if f := &l.h.Fields[i]; strings.EqualFold(view(f.Name), name) {
			out = append(out, string(f.Value))
		}
	}
	return out
}

// leanConns tracks the connections on the lean path between requests, so that the drain
// closes them at once (a busy one closes after its request).
type leanConns struct {
	mu       sync.Mutex
	draining bool
	idleSet  map[*trackedConn]struct{}
}

// idle marks c as waiting for its next request; false once draining (the caller closes it).
func (l *leanConns) idle(c *trackedConn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.draining {
		return false
	}
	if l.idleSet == nil {
		l.idleSet = map[*trackedConn]struct{}{}
	}
	l.idleSet[c] = struct{}{}
	return true
}

// busy marks c as serving a request.
func (l *leanConns) busy(c *trackedConn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.idleSet, c)
}

func (l *leanConns) remove(c *trackedConn) { l.busy(c) }

func (l *leanConns) isDraining() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.draining
}

// drain closes the idle connections, and makes every other close after its request.
func (l *leanConns) drain() {
	l.mu.Lock()
	l.draining = true
	idle := slices.Collect(maps.Keys(l.idleSet))
	l.mu.Unlock()
	for _, c := range idle {
		_ = c.Close()
	}
}
