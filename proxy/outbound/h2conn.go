package outbound

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"time"

	"go.uber.org/zap"
	"golang.org/x/net/http2/hpack"

	"github.com/meridian-mesh/meridian/proxy/balance"
	"github.com/meridian-mesh/meridian/proxy/h1"
	"github.com/meridian-mesh/meridian/proxy/h2"
	"github.com/meridian-mesh/meridian/proxy/httpproxy"
	"github.com/meridian-mesh/meridian/proxy/internal/rawio"
	"github.com/meridian-mesh/meridian/proxy/transportheader"
)

// HTTP/2 with prior knowledge (gRPC's) is served on the lean relay of proxy/h2: each
// request is routed as serveHTTP routes it, balanced with P2C, and relayed frame by frame to
// a multiplexed HTTP/2 connection of its endpoint (pooled per endpoint, dialled as dial
// does). When the target is resolved and a pooled connection can take the stream, all of it
// happens on the client connection's read loop; otherwise a goroutine resolves, dials
// (retrying a connection error once on another endpoint) and then relays. A request the
// relay does not take (CONNECT, one without an authority to route by) is served by
// serveHTTP itself, through the stream's net/http adapter.

// ordinary is rawio.Ordinary: HTTP/2 client connections and the endpoint connections that
// serve them read and write with ordinary system calls (rawio's comment says why). A test
// swaps it to see what it finds.
var ordinary = rawio.Ordinary

// serveH2 serves a client connection detected as HTTP/2 until it ends.
func (o *Outbound) serveH2(cc *clientConn, entry *connEntry) {
	ordinary(cc.raw)
	sc := h2.NewServerConn(cc.Conn, o.h2cfg, &h2handler{o: o, cc: cc})
	if !o.conns.h2(entry, sc) {
		sc.Close()
	}
	_ = sc.Serve()
	o.conns.remove(cc.raw)
}

// h2handler routes the requests of one client connection (its read loop's).
type h2handler struct {
	o                  *Outbound
	cc                 *clientConn
	memoHost, memoAuth string // the last :authority routed and its authority
}

func (h *h2handler) ServeStream(st *h2.Stream) (*h2.Conn, *h2.Edit, h2.Observer) {
	o, req := h.o, st.Request()
	if req.Method == http.MethodConnect {
		h.slow(st)
		return nil, nil, nil
	}
	authority, ok := h.route(req)
	if !ok {
		h.slow(st)
		return nil, nil, nil
	}
	if !o.requests.enter() {
		respondError(st, req, http.StatusServiceUnavailable, "proxy is shutting down")
		return nil, nil, nil
	}
	x := &h2exchange{o: o, st: st, grpc: isGRPCContentType(req.Get("content-type")), start: time.Now()}
	if t := o.targets.tryAcquire(authority); t != nil && (t.direct == nil || !h.cc.transparent() || authority == h.cc.origAuth) {
		x.t = t
		if up := x.pickPooled(); up != nil {
			return up, nil, x
		}
	} else if t != nil {
		t.release() // a Host discovery does not know: the slow path goes to the original destination
	}
	go x.slow(authority, h.cc) // owned by o.requests, which Serve waits for
	return nil, nil, nil
}

// slow serves a request the relay does not take with serveHTTP, as the net/http path
// would.
func (h *h2handler) slow(st *h2.Stream) {
	if !h.o.requests.enter() {
		respondError(st, st.Request(), http.StatusServiceUnavailable, "proxy is shutting down")
		return
	}
	ctx := context.WithValue(h.o.ctx, connKey{}, h.cc)
	go func() { // owned by o.requests, which Serve waits for
		defer h.o.requests.exit()
		st.ServeHTTP(ctx, http.HandlerFunc(h.o.serveHTTP))
	}()
}

// route returns the request's authority by serveHTTP's rules; false for a request the
// relay leaves to it (no :authority nor Host, or one that does not parse).
func (h *h2handler) route(req *h2.Header) (string, bool) {
	host := req.Authority
	if host == "" {
		host = req.Get("host")
	}
	cc := h.cc
	switch {
	case host == "" && !cc.transparent():
		return "", false
	case cc.transparent() && (host == "" || !h.o.isClusterName(host)):
		return cc.origAuth, true
	case host == h.memoHost:
		return h.memoAuth, true
	}
	port := uint16(80)
	if cc.transparent() {
		port = cc.origDst.Port()
	}
	a, err := httpproxy.ParseAuthority(host, port)
	if err != nil {
		return "", false
	}
	h.memoHost, h.memoAuth = host, a.String()
	return h.memoAuth, true
}

// h2exchange is one relayed request: its target, endpoint and balancer handle, and what
// the response said, for the metrics.
type h2exchange struct {
	o          *Outbound
	st         *h2.Stream
	t          *target
	ep         *endpoint
	be         *balance.Endpoint[*endpoint]
	h          balance.Handle
	start      time.Time
	grpc       bool
	status     int
	grpcStatus string
	// rtt is the time from start to the response header (0 before it): the balancer's
	// sample, as on the HTTP/1 paths, not the whole exchange (a stream of minutes).
	rtt time.Duration
}

// pickPooled picks the endpoint and returns a pooled connection to it that can take the
// stream; nil (with no endpoint held) when none can.
func (x *h2exchange) pickPooled() *h2.Conn {
	t := x.t
	if t.direct != nil {
		x.ep = t.direct
		if up := x.ep.leanH2.Take(); up != nil {
			return up
		}
		x.ep = nil
		return nil
	}
	be, err := t.p2c.Pick(x.start)
	if err != nil {
		return nil
	}
	ep := be.Value()
	up := ep.leanH2.Take()
	if up == nil {
		return nil
	}
	x.ep, x.be, x.h = ep, be, t.p2c.Start(be)
	return up
}

// slow resolves the target, dials a connection when the pool has none that can take the
// stream (once more to another endpoint when that fails to connect), and relays.
func (x *h2exchange) slow(authority string, cc *clientConn) {
	o := x.o
	if x.t == nil {
		ctx, cancel := context.WithTimeout(o.ctx, o.cfg.ResolveTimeout)
		t, err := o.targets.acquire(ctx, authority)
		if err == nil && t.direct != nil && cc.transparent() && authority != cc.origAuth {
			t.release()
			t, err = o.targets.acquire(ctx, cc.origAuth)
		}
		cancel()
		if err != nil {
			o.log.Debug("http/2: resolve", zap.String("authority", authority), zap.Error(err))
			x.fail(http.StatusServiceUnavailable, "discovery: "+err.Error())
			return
		}
		x.t = t
	}
	var tried *balance.Endpoint[*endpoint]
	var lastErr error
	for attempt := 0; attempt < 2; attempt++ {
		ep, be := x.t.direct, (*balance.Endpoint[*endpoint])(nil)
		if ep == nil {
			var err error
			if be, err = x.t.p2c.Pick(x.start); err != nil {
				break
			}
			if be == tried {
				if be = otherThan(x.t.p2c.Endpoints(), tried); be == nil {
					break
				}
			}
			ep = be.Value()
		}
		x.ep, x.be, x.h = ep, be, balance.Handle{}
		if be != nil {
			x.h = x.t.p2c.Start(be)
		}
		up, err := ep.leanConn2(o)
		if err == nil {
			x.st.Relay(up, nil, x)
			return
		}
		now := time.Now()
		x.h.Done(now, now.Sub(x.start), true)
		ep.afterRequest()
		lastErr, tried, x.ep = err, be, nil
		if be == nil || !isConnectError(err) {
			break
		}
		o.log.Debug("http/2: connect failed, trying another endpoint", zap.String("authority", x.t.authority), zap.Error(err))
	}
	if lastErr == nil {
		x.fail(http.StatusServiceUnavailable, "no endpoints for "+x.t.authority)
		return
	}
	status := http.StatusBadGateway
	var ne net.Error
	if errors.As(lastErr, &ne) && ne.Timeout() {
		status = http.StatusGatewayTimeout
	}
	x.fail(status, "upstream: "+lastErr.Error())
}

// fail answers a request no endpoint took, and ends the exchange.
func (x *h2exchange) fail(status int, msg string) {
	respondError(x.st, x.st.Request(), status, msg)
	if x.t != nil {
		x.t.release()
	}
	x.o.requests.exit()
}

// Header notes the response's status and grpc-status.
func (x *h2exchange) Header(h *h2.Header, trailers bool) {
	if !trailers {
		x.status = h.Status
		x.rtt = time.Since(x.start)
	}
	if gs := h.Get("grpc-status"); gs != "" {
		x.grpcStatus = gs
	}
}

// Done counts the exchange (balancer, metrics) and, when it failed before a response was
// forwarded, answers the client with the proxy's error.
func (x *h2exchange) Done(st *h2.Stream, err error) {
	now := time.Now()
	if ep := x.ep; ep != nil {
		// The balancer passes over an endpoint that failed as a server fails (a 5xx, or a
		// grpc-status HTTP maps to one), as the HTTP/1 paths do; the metrics count any
		// non-zero grpc-status as a failure, as Linkerd's classifier does.
		failed := err != nil || x.status >= 500 || grpcServerFailure(x.grpcStatus)
		rtt := x.rtt
		if rtt == 0 { // no response header: the time until it failed
			rtt = now.Sub(x.start)
		}
		// The sample is of the response head's time, as the HTTP/1 paths take it (their
		// exchange is done for the balancer once the head is read); the endpoint counted
		// the stream as in flight until now.
		x.h.Done(x.start.Add(rtt), rtt, failed)
		ep.route.Request()
		status := x.status
		if err != nil {
			status = 0
		}
		ep.route.Response(status, x.grpcStatus, failed || x.grpcStatus != "" && x.grpcStatus != "0", now.Sub(x.start))
		ep.afterRequest()
	}
	if err != nil && x.status == 0 {
		x.o.log.Debug("http/2: upstream", zap.String("authority", x.t.authority), zap.Error(err))
		respondError(st, st.Request(), http.StatusBadGateway, "upstream: "+err.Error())
	}
	x.t.release()
	x.o.requests.exit()
}

// grpcServerFailure reports whether a grpc-status is one the gRPC-HTTP mapping answers with a
// 5xx: Unknown, DeadlineExceeded, Unimplemented, Internal, Unavailable, DataLoss. The others
// (NotFound, PermissionDenied, ...) are the application's answers, not the endpoint failing.
func grpcServerFailure(code string) bool {
	switch code {
	case "2", "4", "12", "13", "14", "15":
		return true
	}
	return false
}

// respondError answers a request the proxy could not forward, as proxyError does: the
// reason in l5d-proxy-error; a gRPC request gets a trailers-only UNAVAILABLE.
func respondError(st *h2.Stream, req *h2.Header, status int, msg string) {
	msg = h1.Sanitize(msg)
	if isGRPCContentType(req.Get("content-type")) {
		st.Respond(http.StatusOK, []hpack.HeaderField{{Name: "content-type", Value: "application/grpc"},
			{Name: "grpc-status", Value: "14"}, {Name: "grpc-message", Value: msg}, {Name: "l5d-proxy-error", Value: msg}}, nil)
		return
	}
	st.Respond(status, []hpack.HeaderField{{Name: "content-type", Value: "text/plain; charset=utf-8"},
		{Name: "x-content-type-options", Value: "nosniff"}, {Name: "l5d-proxy-error", Value: msg}}, []byte(msg+"\n"))
}

// retiredError is leanConn2's error for an endpoint whose pool takes no connection any more.
func (e *endpoint) retiredError(o *Outbound) error {
	if o.ctx.Err() != nil {
		return errStopping
	}
	return &connectError{e.dialAddr, errRetired}
}

func isGRPCContentType(ct string) bool { return strings.HasPrefix(ct, "application/grpc") }

// leanConn2 returns a pooled HTTP/2 connection to e with a stream reserved, dialling one
// when none can take it.
//
// An endpoint retired while the request picked it (it left the target between the pick and
// the dial) answers with a connect error: nothing was sent, so the caller tries another
// endpoint, as for a refused connection. Once the proxy stops, it is errStopping.
func (e *endpoint) leanConn2(o *Outbound) (*h2.Conn, error) {
	if c := e.leanH2.Take(); c != nil {
		return c, nil
	}
	if e.retired.Load() {
		return nil, e.retiredError(o)
	}
	nc, err := e.dial(o.ctx, transportheader.HTTP2)
	if err != nil {
		return nil, err
	}
	c, err := h2.NewClientConn(nc, o.h2cfg)
	if err != nil {
		_ = nc.Close()
		return nil, &connectError{e.dialAddr, err}
	}
	if !e.leanH2.Add(c) {
		return nil, e.retiredError(o)
	}
	o.h2conns.Add(1)
	go func() { // owned by o.h2conns, which Serve waits for once the pools are closed
		defer o.h2conns.Done()
		if err := c.Run(); err != nil {
			o.log.Debug("http/2: upstream connection", zap.String("addr", e.dialAddr), zap.Error(err))
		}
	}()
	if c := e.leanH2.Take(); c != nil {
		return c, nil
	}
	return nil, &connectError{e.dialAddr, errors.New("the new HTTP/2 connection takes no stream")}
}
