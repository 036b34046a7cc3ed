package inbound

import (
	"context"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/meridian-mesh/meridian/proxy/inbound/policy"
	"github.com/meridian-mesh/meridian/proxy/metrics"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Header names.
const (
	hdrClientID   = "L5d-Client-Id"
	hdrProxyError = "L5d-Proxy-Error"
	hdrOrigProto  = "L5d-Orig-Proto" // a Linkerd client proxy upgraded HTTP/1 to HTTP/2
)

// hopHeaders are hop-by-hop headers, removed before forwarding (RFC 9110 section 7.6.1;
// HTTP2-Settings, an h2c upgrade's, is connection-specific too: RFC 7540 section 3.2.1).
var hopHeaders = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade", "Http2-Settings"}

// httpConn is an HTTP connection handed to the http.Server: the session and what every
// request on it shares.
type httpConn struct {
	net.Conn
	s      *session
	port   *policy.Port
	target string   // the application's address
	id     []string // {identity}: the l5d-client-id value, shared by every request
	route  atomic.Pointer[routeMetrics]
}

// routeMetrics caches the route metrics of the connection's last authority and server.
type routeMetrics struct {
	authority, srv string
	m              *metrics.Route
}

type connKey struct{}

func (i *Inbound) newHTTPServer() *http.Server {
	p := new(http.Protocols)
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	return &http.Server{
		Handler:   http.HandlerFunc(i.serveRequest),
		Protocols: p,
		// A connection handed over from the lean path reads each request head within
		// DetectTimeout, as the lean path does (net/http's default: no limit). Its heads may
		// be larger than the lean path takes (net/http's 1 MiB).
		ReadHeaderTimeout: i.cfg.DetectTimeout,
		IdleTimeout:       i.cfg.IdleTimeout,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, connKey{}, c)
		},
		ErrorLog: debugLog(i.log.Named("http")),
	}
}

func (i *Inbound) transports() (h1, h2 *http.Transport) {
	dial := i.dial
	h1 = &http.Transport{
		DialContext:         dial,
		MaxIdleConns:        0, // bounded per application address
		MaxIdleConnsPerHost: i.cfg.MaxIdleConnsPerApp,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
		ForceAttemptHTTP2:   false,
	}
	p := new(http.Protocols)
	p.SetUnencryptedHTTP2(true)
	h2 = &http.Transport{
		DialContext:        dial,
		Protocols:          p,
		IdleConnTimeout:    90 * time.Second,
		DisableCompression: true,
	}
	return h1, h2
}

// serveHTTP serves an HTTP session: on the lean HTTP/2 relay when it is known to be HTTP/2,
// else on the lean HTTP/1.1 path (net/http serves whatever that path hands it).
func (i *Inbound) serveHTTP(tc *trackedConn, s *session, port *policy.Port, target string, h2 bool) {
	if h2 {
		i.serveH2(s, port, target)
		return
	}
	i.serveH1(tc, s, port, target)
}

// serveNetHTTP hands the session to the HTTP server.
func (i *Inbound) serveNetHTTP(s *session, port *policy.Port, target string) {
	hc := &httpConn{Conn: s.conn, s: s, port: port, target: target}
	if s.client.Identity != "" {
		hc.id = []string{s.client.Identity}
	}
	if !i.httpLis.Handoff(hc) {
		_ = hc.Close() // shutting down
	}
}

func (hc *httpConn) routeMetrics(i *Inbound, authority, srv string) *metrics.Route {
	if rm := hc.route.Load(); rm != nil && rm.authority == authority && rm.srv == srv {
		return rm.m
	}
	m := i.metrics.Route(metrics.Labels{Direction: "inbound", Authority: authority, TLS: hc.s.tlsLabel(),
		ClientID: hc.s.client.Identity, SrvName: srv})
	hc.route.Store(&routeMetrics{authority: authority, srv: srv, m: m})
	return m
}

// serveRequest authorizes and forwards one request.
func (i *Inbound) serveRequest(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	hc, _ := r.Context().Value(connKey{}).(*httpConn)
	if hc == nil {
		http.Error(w, "inbound: request without connection", http.StatusInternalServerError)
		return
	}
	srv := hc.port.Policy()
	if status, msg, failed := i.admit(hc.s, srv, srv.Route(r)); status != 0 {
		rm := i.refusedRoute(hc.s, srv.Name)
		if status == http.StatusForbidden && r.ProtoMajor == 1 {
			w.Header().Set("Connection", "close") // see Config.MaxConns
		}
		sent := i.proxyError(w, r, status, msg)
		rm.Response(sent, grpcStatusOf(w.Header()), failed, time.Since(start))
		return
	}
	rm := hc.routeMetrics(i, r.Host, srv.Name)
	rm.Request()
	status, grpcStatus, failed := i.forward(w, r, hc)
	rm.Response(status, grpcStatus, failed, time.Since(start))
}

// isGRPC reports a gRPC request.
func isGRPC(r *http.Request) bool {
	ct := r.Header["Content-Type"]
	return len(ct) > 0 && strings.HasPrefix(ct[0], "application/grpc")
}

// grpcCodes maps the proxy's error statuses to gRPC codes.
var grpcCodes = map[int]string{
	http.StatusForbidden: "7", http.StatusNotFound: "5", http.StatusInternalServerError: "13",
	http.StatusBadGateway: "14", http.StatusServiceUnavailable: "14", http.StatusGatewayTimeout: "4",
}

// proxyError answers a request the proxy does not forward, with l5d-proxy-error; a gRPC
// request gets a trailers-only response with the matching grpc-status. It returns the
// HTTP status sent.
func (i *Inbound) proxyError(w http.ResponseWriter, r *http.Request, status int, msg string) int {
	h := w.Header()
	h.Set(hdrProxyError, msg)
	if isGRPC(r) {
		h.Set("Content-Type", "application/grpc")
		h.Set("Grpc-Status", grpcCodes[status])
		h.Set("Grpc-Message", msg)
		w.WriteHeader(http.StatusOK)
		return http.StatusOK
	}
	h.Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, msg+"\n")
	return status
}

func grpcStatusOf(h http.Header) string {
	if v := h["Grpc-Status"]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// copyPool holds the buffers response bodies are copied through.
var copyPool = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// forward sends r to the application and copies the response back. It returns the status,
// the grpc-status and whether the request failed.
func (i *Inbound) forward(w http.ResponseWriter, r *http.Request, hc *httpConn) (int, string, bool) {
	h := r.Header
	origProto := h[hdrOrigProto]
	if len(h["Upgrade"]) > 0 && r.ProtoMajor == 1 && !upgradesToH2C(h) {
		return i.upgrade(w, r, hc)
	}
	removeHop(h) // an h2c upgrade's Upgrade and HTTP2-Settings with the rest
	delete(h, hdrClientID)
	delete(h, hdrOrigProto)
	if hc.id != nil {
		h[hdrClientID] = hc.id
	}
	if r.ProtoMajor == 2 && len(r.Header["Te"]) == 0 && isGRPC(r) {
		h["Te"] = teTrailers
	}
	out := new(http.Request)
	*out = *r
	u := *r.URL
	u.Scheme, u.Host = "http", hc.target
	out.URL, out.RequestURI, out.Close = &u, "", false
	if r.ContentLength == 0 {
		out.Body = nil
	} else if r.ProtoMajor == 1 {
		// The application may answer before it read the whole body (and stream both ways).
		_ = http.NewResponseController(w).EnableFullDuplex()
	}
	tr := i.h1
	if r.ProtoMajor == 2 && origProto == nil {
		tr = i.h2
	}
	res, err := tr.RoundTrip(out)
	if err != nil {
		status := http.StatusBadGateway
		if errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) {
			status = http.StatusGatewayTimeout
		}
		if r.Context().Err() == nil {
			i.log.Debug("inbound: forwarding failed", zap.String("app", hc.target), zap.Error(err))
			status = i.proxyError(w, r, status, "connection to the application failed")
		}
		return status, grpcStatusOf(w.Header()), true
	}
	defer res.Body.Close()
	removeHop(res.Header)
	dst := w.Header()
	for k, v := range res.Header {
		dst[k] = v
	}
	if origProto != nil {
		dst[hdrOrigProto] = origProto
	}
	w.WriteHeader(res.StatusCode)
	failed := !copyBody(w, res)
	for k, v := range res.Trailer {
		dst[http.TrailerPrefix+k] = v
	}
	grpc := grpcStatusOf(res.Trailer)
	if grpc == "" {
		grpc = grpcStatusOf(res.Header)
	}
	failed = failed || res.StatusCode >= 500 || (grpc != "" && grpc != "0")
	return res.StatusCode, grpc, failed
}

var teTrailers = []string{"trailers"}

// copyBody copies the response body, flushing after each read when the length is not
// known (streams: gRPC, server-sent events). It reports success.
func copyBody(w http.ResponseWriter, res *http.Response) bool {
	bp := copyPool.Get().(*[]byte)
	defer copyPool.Put(bp)
	buf := *bp
	flush := res.ContentLength < 0
	flusher, _ := w.(http.Flusher)
	for {
		n, err := res.Body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return false
			}
			if flush && flusher != nil {
				flusher.Flush()
			}
		}
		if errors.Is(err, io.EOF) {
			return true
		}
		if err != nil {
			return false
		}
	}
}

// removeHop removes the hop-by-hop headers and those the Connection header names; it keeps
// "Te: trailers", which gRPC needs end to end.
func removeHop(h http.Header) {
	for _, f := range h["Connection"] {
		for sf := range strings.SplitSeq(f, ",") {
			if sf = strings.TrimSpace(sf); sf != "" {
				delete(h, http.CanonicalHeaderKey(sf))
			}
		}
	}
	te := h["Te"]
	for _, k := range hopHeaders {
		if len(h[k]) > 0 {
			delete(h, k)
		}
	}
	for _, v := range te {
		if strings.EqualFold(strings.TrimSpace(v), "trailers") {
			h["Te"] = teTrailers
			break
		}
	}
}

// upgradesToH2C reports whether h asks to upgrade to h2c. Such a request is forwarded as a
// plain request, its upgrade headers stripped, as linkerd2-proxy does: after the switch the
// connection would carry HTTP/2 requests that no route authorizes one by one, with whatever
// l5d-client-id they claim.
func upgradesToH2C(h http.Header) bool {
	for _, v := range h["Upgrade"] {
		for p := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(p), "h2c") {
				return true
			}
		}
	}
	return false
}

// upgrade forwards an HTTP/1.1 upgrade (WebSocket and the like) with httputil.ReverseProxy,
// which switches both connections to raw bytes after the 101.
func (i *Inbound) upgrade(w http.ResponseWriter, r *http.Request, hc *httpConn) (int, string, bool) {
	status := 0
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(&url.URL{Scheme: "http", Host: hc.target})
			pr.Out.Host = r.Host
			delete(pr.Out.Header, hdrClientID)
			if hc.id != nil {
				pr.Out.Header[hdrClientID] = hc.id
			}
		},
		Transport:      i.h1,
		ModifyResponse: func(res *http.Response) error { status = res.StatusCode; return nil },
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			i.log.Debug("inbound: upgrade failed", zap.String("app", hc.target), zap.Error(err))
			status = i.proxyError(w, r, http.StatusBadGateway, "connection to the application failed")
		},
	}
	rp.ServeHTTP(w, r)
	return status, "", status == 0 || status >= 500
}

// debugLog is net/http's error log (per-connection complaints: handshake errors, bad
// requests) written at debug. (zap.IncreaseLevel cannot lower a logger's level: it only
// printed an error at startup.)
func debugLog(l *zap.Logger) *log.Logger {
	std, _ := zap.NewStdLogAt(l, zapcore.DebugLevel) // fails only for a level zap does not know
	return std
}
