package inbound

import (
	"context"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	"golang.org/x/net/http2/hpack"

	"github.com/meridian-mesh/meridian/proxy/h1"
	"github.com/meridian-mesh/meridian/proxy/h2"
	"github.com/meridian-mesh/meridian/proxy/inbound/policy"
	"github.com/meridian-mesh/meridian/proxy/internal/rawio"
	"github.com/meridian-mesh/meridian/proxy/metrics"
)

// HTTP/2 sessions are served on the lean relay of proxy/h2: each request is authorized like
// serveRequest, has any l5d-client-id removed and the client's identity set, and is relayed
// frame by frame to a multiplexed h2c connection to the application (pooled per address).
// A request a Linkerd client proxy upgraded from HTTP/1 (l5d-orig-proto) goes to the
// net/http path (serveRequest), which downgrades it, through the stream's net/http adapter.

// ordinary is rawio.Ordinary: HTTP/2 sessions and the connections to the application that
// serve them read and write with ordinary system calls (rawio's comment says why). A test
// swaps it to see what it finds.
var ordinary = rawio.Ordinary

// serveH2 serves an HTTP/2 session until it ends.
func (i *Inbound) serveH2(s *session, port *policy.Port, target string) {
	ordinary(s.conn)
	h := &h2handler{i: i, s: s, port: port, target: target, pool: i.h2pools.get(target)}
	drop := []string{"l5d-client-id"}
	var add []hpack.HeaderField
	if s.client.Identity != "" {
		add = []hpack.HeaderField{{Name: "l5d-client-id", Value: s.client.Identity}}
	}
	h.edit = &h2.Edit{Drop: drop, Add: add}
	h.grpcEdit = &h2.Edit{Drop: drop, Add: append(append([]hpack.HeaderField(nil), add...), hpack.HeaderField{Name: "te", Value: "trailers"})}
	sc := h2.NewServerConn(s.conn, i.h2cfg, h)
	if !i.h2served.add(sc) {
		sc.Close()
	}
	_ = sc.Serve()
	i.h2served.remove(sc)
}

// h2handler authorizes and relays the requests of one HTTP/2 session (its read loop's).
type h2handler struct {
	i              *Inbound
	s              *session
	port           *policy.Port
	target         string
	pool           *h2.Pool
	edit, grpcEdit *h2.Edit

	memoAuth, memoSrv string // the route metrics of the last authority and server
	memoRM            *metrics.Route
}

func (h *h2handler) ServeStream(st *h2.Stream) (*h2.Conn, *h2.Edit, h2.Observer) {
	i, s, req := h.i, h.s, st.Request()
	if req.Has("l5d-orig-proto") || req.Method == http.MethodConnect {
		h.slow(st)
		return nil, nil, nil
	}
	start := time.Now()
	authority := req.Authority
	if authority == "" {
		authority = req.Get("host")
	}
	srv := h.port.Policy()
	path, query, _ := strings.Cut(req.Path, "?")
	if strings.IndexByte(path, '%') >= 0 {
		if p, err := url.PathUnescape(path); err == nil {
			path = p
		}
	}
	grpc := strings.HasPrefix(req.Get("content-type"), "application/grpc")
	route := srv.Match(&policy.Request{Method: req.Method, Host: authority, Path: path, RawQuery: query, Header: h2Header{req}})
	if status, msg, failed := i.admit(s, srv, route); status != 0 {
		h.refuse(st, i.refusedRoute(s, srv.Name), start, grpc, status, msg, failed)
		return nil, nil, nil
	}
	rm := h.routeMetrics(authority, srv.Name)
	rm.Request()
	edit := h.edit
	if grpc && !req.Has("te") {
		edit = h.grpcEdit
	}
	x := &h2exchange{h: h, rm: rm, start: start, grpc: grpc}
	if up := h.pool.Take(); up != nil {
		return up, edit, x
	}
	i.h2wg.Add(1)
	go func() { // owned by i.h2wg, which Run waits for
		defer i.h2wg.Done()
		up, err := i.h2dial(h.pool, h.target)
		if err != nil {
			i.log.Debug("inbound: forwarding failed", zap.String("app", h.target), zap.Error(err))
			x.fail(st, http.StatusBadGateway)
			return
		}
		st.Relay(up, edit, x)
	}()
	return nil, nil, nil
}

// slow serves a request with serveRequest, the net/http path.
func (h *h2handler) slow(st *h2.Stream) {
	hc := &httpConn{s: h.s, port: h.port, target: h.target}
	if id := h.s.client.Identity; id != "" {
		hc.id = []string{id}
	}
	ctx := context.WithValue(context.Background(), connKey{}, hc)
	h.i.h2wg.Add(1)
	go func() { // owned by i.h2wg, which Run waits for
		defer h.i.h2wg.Done()
		st.ServeHTTP(ctx, http.HandlerFunc(h.i.serveRequest))
	}()
}

// routeMetrics returns the route metrics of authority and server srv.
func (h *h2handler) routeMetrics(authority, srv string) *metrics.Route {
	if h.memoRM == nil || h.memoAuth != authority || h.memoSrv != srv {
		h.memoAuth, h.memoSrv = authority, srv
		h.memoRM = h.i.metrics.Route(metrics.Labels{Direction: "inbound", Authority: authority, TLS: h.s.tlsLabel(),
			ClientID: h.s.client.Identity, SrvName: srv})
	}
	return h.memoRM
}

// grpcCode is the grpc-status of the proxy's own answers.
func grpcCode(status int) string {
	if c := grpcCodes[status]; c != "" {
		return c
	}
	return "2"
}

// refuse answers a request the proxy does not forward, as proxyError does.
func (h *h2handler) refuse(st *h2.Stream, rm *metrics.Route, start time.Time, grpc bool, status int, msg string, failed bool) {
	respond(st, grpc, status, msg, func(sent int, gs string) { rm.Response(sent, gs, failed, time.Since(start)) })
}

// respond answers with the proxy's error: l5d-proxy-error, and for gRPC a trailers-only
// response with the matching grpc-status. It counts the answer (the status and grpc-status
// sent) before sending it, as net/http's server would have.
func respond(st *h2.Stream, grpc bool, status int, msg string, count func(sent int, grpcStatus string)) {
	msg = h1.Sanitize(msg)
	if grpc {
		code := grpcCode(status)
		count(http.StatusOK, code)
		st.Respond(http.StatusOK, []hpack.HeaderField{{Name: "l5d-proxy-error", Value: msg}, {Name: "content-type", Value: "application/grpc"},
			{Name: "grpc-status", Value: code}, {Name: "grpc-message", Value: msg}}, nil)
		return
	}
	count(status, "")
	st.Respond(status, []hpack.HeaderField{{Name: "l5d-proxy-error", Value: msg}, {Name: "content-type", Value: "text/plain; charset=utf-8"}},
		[]byte(msg+"\n"))
}

// h2Header gives route matching a request's fields by canonical name.
type h2Header struct{ h *h2.Header }

func (hh h2Header) Values(name string) []string {
	var out []string
	for _, f := range hh.h.Fields {
		if strings.EqualFold(f.Name, name) {
			out = append(out, f.Value)
		}
	}
	return out
}

// h2exchange is one relayed request, for its metrics.
type h2exchange struct {
	h          *h2handler
	rm         *metrics.Route
	start      time.Time
	grpc       bool
	status     int
	grpcStatus string
}

func (x *h2exchange) Header(hd *h2.Header, trailers bool) {
	if !trailers {
		x.status = hd.Status
	}
	if gs := hd.Get("grpc-status"); gs != "" {
		x.grpcStatus = gs
	}
}

func (x *h2exchange) Done(st *h2.Stream, err error) {
	if err != nil && x.status == 0 {
		x.h.i.log.Debug("inbound: forwarding failed", zap.String("app", x.h.target), zap.Error(err))
		x.fail(st, http.StatusBadGateway)
		return
	}
	failed := err != nil || x.status >= 500 || x.grpcStatus != "" && x.grpcStatus != "0"
	x.rm.Response(x.status, x.grpcStatus, failed, time.Since(x.start))
}

// fail answers a request the application did not answer.
func (x *h2exchange) fail(st *h2.Stream, status int) {
	respond(st, x.grpc, status, "connection to the application failed", func(sent int, gs string) {
		x.rm.Response(sent, gs, true, time.Since(x.start))
	})
}

// h2dial returns a pooled connection to the application at addr with a stream reserved,
// dialling one (h2c) when none can take it.
func (i *Inbound) h2dial(pool *h2.Pool, addr string) (*h2.Conn, error) {
	if c := pool.Take(); c != nil {
		return c, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), i.cfg.ConnectTimeout)
	defer cancel()
	nc, err := i.dial(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	ordinary(nc)
	c, err := h2.NewClientConn(nc, i.h2cfg)
	if err != nil {
		_ = nc.Close()
		return nil, err
	}
	if !pool.Add(c) {
		return nil, h2.ErrConnClosed
	}
	i.h2wg.Add(1)
	go func() { // owned by i.h2wg, which Run waits for once the pools are closed
		defer i.h2wg.Done()
		if err := c.Run(); err != nil {
			i.log.Debug("inbound: application connection", zap.String("app", addr), zap.Error(err))
		}
	}()
	if c := pool.Take(); c != nil {
		return c, nil
	}
	return nil, h2.ErrConnClosed
}

// h2served are the relay's client connections, which the drain tells to go away.
type h2served struct {
	mu       sync.Mutex
	draining bool
	m        map[*h2.Conn]struct{}
}

// add registers c; false once draining.
func (s *h2served) add(c *h2.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.draining {
		return false
	}
	if s.m == nil {
		s.m = map[*h2.Conn]struct{}{}
	}
	s.m[c] = struct{}{}
	return true
}

func (s *h2served) remove(c *h2.Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, c)
}

// closeIdle sends a GOAWAY to the connections without a stream since before t: each closes
// at once (it has no stream), and the client opens a new one for its next request.
func (s *h2served) closeIdle(t time.Time) {
	s.mu.Lock()
	var idle []*h2.Conn
	for c := range s.m {
		if c.Idle(t) {
			idle = append(idle, c)
		}
	}
	s.mu.Unlock()
	for _, c := range idle {
		c.Shutdown()
	}
}

// drain sends every connection a GOAWAY: each closes once its streams are done.
func (s *h2served) drain() {
	s.mu.Lock()
	s.draining = true
	all := slices.Collect(maps.Keys(s.m))
	s.mu.Unlock()
	for _, c := range all {
		c.Shutdown()
	}
}
