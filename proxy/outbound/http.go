package outbound

import (
	"context"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/meridian-mesh/meridian/proxy/balance"
	"github.com/meridian-mesh/meridian/proxy/httpproxy"
)

// httpServer is the server of every client HTTP connection, HTTP/1 and HTTP/2 with prior
// knowledge (both ways in: serveConn hands it explicit and detected connections).
func (o *Outbound) httpServer() *http.Server {
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	return &http.Server{
		Handler:           http.HandlerFunc(o.serveHTTP),
		Protocols:         &p,
		ReadHeaderTimeout: o.cfg.DetectTimeout,
		MaxHeaderBytes:    o.cfg.MaxHeaderBytes,
		BaseContext:       func(net.Listener) context.Context { return o.ctx },
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, connKey{}, c)
		},
		ErrorLog: debugLog(o.log.Named("http")),
	}
}

// serveHTTP routes one client request (see route) and forwards it.
func (o *Outbound) serveHTTP(w http.ResponseWriter, req *http.Request) {
	if !o.requests.enter() {
		proxyError(w, req, http.StatusServiceUnavailable, "proxy is shutting down")
		return
	}
	defer o.requests.exit()
	cc, ok := req.Context().Value(connKey{}).(*clientConn)
	if !ok {
		proxyError(w, req, http.StatusInternalServerError, "request from an unknown connection")
		return
	}
	authority, connect, err := o.route(cc, req)
	if err != nil {
		var he *httpproxy.Error
		if errors.As(err, &he) {
			proxyError(w, req, he.Status, he.Reason)
		} else {
			proxyError(w, req, http.StatusBadRequest, err.Error())
		}
		return
	}
	if connect != nil {
		o.serveConnect(w, req, connect)
		return
	}
	t, err := o.targets.acquire(req.Context(), authority)
	if err == nil && t.direct != nil && cc.transparent() && authority != cc.origAuth {
		// A Host discovery does not know: the connection goes where the client sent it.
		t.release()
		t, err = o.targets.acquire(req.Context(), cc.origAuth)
	}
	if err != nil {
		o.resolveError(w, req, err)
		return
	}
	defer t.release()
	o.forward(w, req, t)
}

// forward sends req to an endpoint of t (or t's direct address) and copies the response back.
func (o *Outbound) forward(w http.ResponseWriter, req *http.Request, t *target) {
	start := time.Now()
	upgrade := prepareRequest(req)
	var body *replayBody
	if req.Body != nil && req.Body != http.NoBody {
		body = &replayBody{ReadCloser: req.Body}
		req.Body = body
	}
	res, ep, h, err := o.roundTrip(req, t, body, start)
	now := time.Now()
	if err != nil {
		h.Done(now, now.Sub(start), true)
		if ep != nil {
			ep.route.Request()
			ep.route.Response(0, "", true, now.Sub(start))
			ep.afterRequest()
		}
		o.upstreamError(w, req, t, err)
		return
	}
	h.Done(now, now.Sub(start), res.StatusCode >= 500)
	defer ep.afterRequest()
	ep.route.Request()
	if res.StatusCode == http.StatusSwitchingProtocols {
		o.switchProtocols(w, req, res, upgrade, ep, start)
		return
	}
	readErr, writeErr := writeResponse(w, res)
	grpcStatus := res.Header.Get("Grpc-Status")
	if grpcStatus == "" {
		grpcStatus = res.Trailer.Get("Grpc-Status")
	}
	failed := res.StatusCode >= 500 || (grpcStatus != "" && grpcStatus != "0") || readErr != nil || writeErr != nil
	ep.route.Response(res.StatusCode, grpcStatus, failed, time.Since(start))
	if readErr != nil {
		// The response is cut short upstream: the client must not take what it got for the
		// whole of it. net/http closes (HTTP/1) or resets (HTTP/2) on this panic, without
		// logging it.
		o.log.Debug("http: response body", zap.String("authority", t.authority), zap.Error(readErr))
		panic(http.ErrAbortHandler)
	}
}

// roundTrip sends req: to t's direct address, or to the endpoint P2C picks, and once more to
// another endpoint when that one cannot be connected to and nothing of the request body was
// read. The handle (zero for a direct target) is the balancer's; ep is the endpoint of the
// answer or of the last failure (nil when there was none to try).
func (o *Outbound) roundTrip(req *http.Request, t *target, body *replayBody, start time.Time) (*http.Response, *endpoint, balance.Handle, error) {
	if t.direct != nil {
		req.URL.Host = t.direct.urlHost
		res, err := t.direct.pool(req.ProtoMajor).RoundTrip(req)
		return res, t.direct, balance.Handle{}, err
	}
	var tried *balance.Endpoint[*endpoint]
	var lastErr error
	var lastEp *endpoint
	for attempt := range 2 {
		be, err := t.p2c.Pick(start)
		if err != nil {
			if lastErr != nil {
				return nil, lastEp, balance.Handle{}, lastErr
			}
			return nil, nil, balance.Handle{}, err
		}
		if be == tried {
			if be = otherThan(t.p2c.Endpoints(), tried); be == nil {
				break
			}
		}
		h := t.p2c.Start(be)
		ep := be.Value()
		req.URL.Host = ep.urlHost
		res, err := ep.pool(req.ProtoMajor).RoundTrip(req)
		if err == nil {
			return res, ep, h, nil
		}
		if attempt > 0 || !isConnectError(err) || body.touched() || req.Context().Err() != nil {
			return nil, ep, h, err
		}
		now := time.Now()
		h.Done(now, now.Sub(start), true)
		ep.afterRequest()
		o.log.Debug("http: connect failed, trying another endpoint", zap.String("authority", t.authority), zap.Error(err))
		tried, lastErr, lastEp = be, err, ep
	}
	return nil, lastEp, balance.Handle{}, lastErr
}

// writeResponse copies res to w: headers without the hop-by-hop ones, the body (flushed as
// it comes when its length is unknown: streams, gRPC), then the trailers. readErr is a
// failure reading the body from upstream, writeErr one writing it to the client.
func writeResponse(w http.ResponseWriter, res *http.Response) (readErr, writeErr error) {
	defer res.Body.Close()
	removeHopByHop(res.Header)
	hdr := w.Header()
	for k, vv := range res.Header {
		hdr[k] = vv
	}
	var declared []string
	if len(res.Trailer) > 0 { // trailers the upstream declared: announce them
		declared = make([]string, 0, len(res.Trailer))
		for k := range res.Trailer {
			declared = append(declared, k)
		}
		hdr["Trailer"] = declared
	}
	w.WriteHeader(res.StatusCode)
	readErr, writeErr = copyBody(w, res.Body, res.ContentLength == -1)
	for k, vv := range res.Trailer { // complete after the body
		if slices.Contains(declared, k) {
			hdr[k] = vv
		} else {
			hdr[trailerKey(k)] = vv
		}
	}
	return readErr, writeErr
}

// trailerKey is the header key that sends an undeclared trailer (net/http's TrailerPrefix),
// without building the string for gRPC's usual ones.
func trailerKey(k string) string {
	switch k {
	case "Grpc-Status":
		return http.TrailerPrefix + "Grpc-Status"
	case "Grpc-Message":
		return http.TrailerPrefix + "Grpc-Message"
	case "Grpc-Status-Details-Bin":
		return http.TrailerPrefix + "Grpc-Status-Details-Bin"
	}
	return http.TrailerPrefix + k
}

// copyBody copies body to w with a pooled buffer, flushing after every write when flush.
func copyBody(w http.ResponseWriter, body io.Reader, flush bool) (readErr, writeErr error) {
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	buf := *bp
	var f http.Flusher
	if flush {
		f, _ = w.(http.Flusher)
	}
	for {
		n, err := body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return nil, werr
			}
			if f != nil {
				f.Flush()
			}
		}
		if err == io.EOF {
			return nil, nil
		}
		if err != nil {
			return err, nil
		}
	}
}

// hopByHop are the headers that belong to one connection (RFC 9110, section 7.6.1), in
// canonical form.
var hopByHop = []string{"Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// removeHopByHop deletes the hop-by-hop headers, and those the Connection header names.
func removeHopByHop(h http.Header) {
	for _, v := range h["Connection"] {
		for _, name := range strings.Split(v, ",") {
			if name = strings.TrimSpace(name); name != "" {
				h.Del(name)
			}
		}
	}
	for _, k := range hopByHop {
		delete(h, k)
	}
}

// emptyUserAgent keeps net/http from sending its own User-Agent when the client sent none.
var emptyUserAgent = []string{""}

// prepareRequest turns a request the server read into one for a Transport: no RequestURI,
// the http scheme (the dial decides plaintext or TLS), no hop-by-hop headers except
// "TE: trailers" (gRPC needs it) and an upgrade's Connection and Upgrade. It returns the
// upgrade asked for ("" for none).
func prepareRequest(req *http.Request) (upgrade string) {
	req.RequestURI = ""
	req.URL.Scheme = "http"
	req.Close = false // the upstream connection stays open for the next request
	h := req.Header
	if req.ProtoMajor == 1 && connectionHas(h, "upgrade") {
		upgrade = h.Get("Upgrade")
	}
	te := h["Te"]
	removeHopByHop(h)
	if len(te) == 1 && strings.EqualFold(te[0], "trailers") {
		h["Te"] = te
	}
	if upgrade != "" {
		h["Connection"] = []string{"Upgrade"}
		h["Upgrade"] = []string{upgrade}
	}
	if _, ok := h["User-Agent"]; !ok {
		h["User-Agent"] = emptyUserAgent
	}
	return upgrade
}

// connectionHas reports whether the Connection header lists token.
func connectionHas(h http.Header, token string) bool {
	for _, v := range h["Connection"] {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

// replayBody is a request body that a connection error leaves intact for a second attempt:
// its Close does nothing until it was read from (a Transport closes the body of a request
// it failed to send; the server closes the real body at the end of the request).
type replayBody struct {
	io.ReadCloser
	read atomic.Bool
}

func (b *replayBody) Read(p []byte) (int, error) {
	b.read.Store(true)
	return b.ReadCloser.Read(p)
}

func (b *replayBody) Close() error {
	if b.read.Load() {
		return b.ReadCloser.Close()
	}
	return nil
}

// touched reports whether anything read the body (nil: no body, never touched).
func (b *replayBody) touched() bool { return b != nil && b.read.Load() }

// resolveError answers a request whose target could not be resolved.
func (o *Outbound) resolveError(w http.ResponseWriter, req *http.Request, err error) {
	if req.Context().Err() != nil {
		return // the client left
	}
	o.log.Debug("http: resolve", zap.String("host", req.Host), zap.Error(err))
	proxyError(w, req, http.StatusServiceUnavailable, "discovery: "+short(err.Error()))
}

// upstreamError answers a request that got no response: 503 for a target without
// endpoints, 504 for a timeout, 502 otherwise.
func (o *Outbound) upstreamError(w http.ResponseWriter, req *http.Request, t *target, err error) {
	if req.Context().Err() != nil {
		return
	}
	status, msg := http.StatusBadGateway, "upstream: "+short(err.Error())
	var ne net.Error
	switch {
	case errors.Is(err, balance.ErrNoEndpoints):
		status, msg = http.StatusServiceUnavailable, "no endpoints for "+t.authority
	case errors.As(err, &ne) && ne.Timeout():
		status = http.StatusGatewayTimeout
	}
	o.log.Debug("http: upstream", zap.String("authority", t.authority), zap.Int("status", status), zap.Error(err))
	proxyError(w, req, status, msg)
}

// proxyError answers a request the proxy could not forward, with the reason in the
// l5d-proxy-error header as linkerd2-proxy does; a gRPC request gets a trailers-only
// UNAVAILABLE instead of an HTTP error.
func proxyError(w http.ResponseWriter, req *http.Request, status int, msg string) {
	h := w.Header()
	h.Set("L5d-Proxy-Error", msg)
	if strings.HasPrefix(req.Header.Get("Content-Type"), "application/grpc") {
		h.Set("Content-Type", "application/grpc")
		h.Set("Grpc-Status", "14")
		h.Set("Grpc-Message", msg)
		w.WriteHeader(http.StatusOK)
		return
	}
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, msg+"\n")
}

// short bounds an error message that goes on the wire.
func short(s string) string {
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}

// debugLog is net/http's error log (per-connection complaints: handshake errors, bad
// requests) written at debug. (zap.IncreaseLevel cannot lower a logger's level: it only
// printed an error at startup.)
func debugLog(l *zap.Logger) *log.Logger {
	std, _ := zap.NewStdLogAt(l, zapcore.DebugLevel) // fails only for a level zap does not know
	return std
}
