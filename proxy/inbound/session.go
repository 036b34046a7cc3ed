package inbound

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/meridian-mesh/meridian/internal/tlsid"
	"github.com/meridian-mesh/meridian/proxy/detect"
	"github.com/meridian-mesh/meridian/proxy/inbound/policy"
	"github.com/meridian-mesh/meridian/proxy/metrics"
	"github.com/meridian-mesh/meridian/proxy/origdst"
	"github.com/meridian-mesh/meridian/proxy/transportheader"
	"go.uber.org/zap"
)

// session is what the preamble learned of a connection.
type session struct {
	conn   net.Conn // the stream after TLS and the transport header
	client policy.Client
	// port is the target port; header reports a transport header, whose protocol is proto.
	port   uint16
	header bool
	proto  transportheader.SessionProtocol
	// passthrough: TLS for another server name, not terminated.
	passthrough bool
	sni         string
	dst         netip.AddrPort // the original destination, when redirected
	local       netip.Addr     // the address the client connected to: the pod's
}

// tlsLabel and clientID are the session's metric labels.
func (s *session) tlsLabel() string {
	if s.client.Identity != "" {
		return metrics.TLSTrue
	}
	return metrics.TLSNoIdentity
}

// refusedRoute returns the route metrics of a request that the policy of server srv refused
// (admit's status): without its authority, which the client chooses. Were it a label, a client
// that the policy refuses could fill the series' bound (metrics.MaxRoutes) with Hosts of its
// choosing, so that the routes of the clients it admits read "other". The client's identity
// stays a label: it is one that the mesh's CA issued, or none.
func (i *Inbound) refusedRoute(s *session, srv string) *metrics.Route {
	m := i.metrics.Route(metrics.Labels{Direction: "inbound", TLS: s.tlsLabel(), ClientID: s.client.Identity, SrvName: srv})
	m.Request()
	return m
}

// admit decides a request that srv's policy matched to route (nil: no route matched), on
// each of the HTTP paths: it counts the authorization and returns status 0 when the request
// goes on, or the status, message and failure of the answer that refuses it (404 without a
// route, 403 when no authorization permits the client, 500 for a route that fails its
// requests).
func (i *Inbound) admit(s *session, srv *policy.Server, route *policy.RoutePolicy) (status int, msg string, failed bool) {
	if route == nil {
		return http.StatusNotFound, "no route found for request", false
	}
	az := metrics.Authz{SrvName: srv.Name, ClientID: s.client.Identity, TLS: s.tlsLabel()}
	authz := route.Authorize(s.client)
	if authz == nil {
		i.metrics.HTTPAuthz(false, az)
		i.log.Debug("inbound: request denied", zap.String("server", srv.Name), zap.String("route", route.Name),
			zap.Stringer("client", s.client.Addr), zap.String("client_id", s.client.Identity))
		return http.StatusForbidden, "unauthorized request on route", false
	}
	az.AuthzName = authz.Name
	i.metrics.HTTPAuthz(true, az)
	if srv.Name == policy.DefaultAudit {
		i.log.Debug("inbound: request allowed by the audit policy", zap.Stringer("client", s.client.Addr))
	}
	if route.Error != "" {
		return http.StatusInternalServerError, route.Error, true
	}
	return 0, "", false
}

// sniffPool holds the buffers the preamble reads a ClientHello record into.
var sniffPool = sync.Pool{New: func() any { b := make([]byte, recordHeaderLen+maxRecordLen); return &b }}

// errNoPort: a connection without transport header and original destination, and no default.
var errNoPort = errors.New("no target port: no transport header, no original destination and no default port")

// preamble reads what comes before the application's bytes: TLS (terminated unless it is
// for another server name) and the transport header, all within Config.DetectTimeout. It
// finds the target port. On error the caller closes c.
func (i *Inbound) preamble(ctx context.Context, c net.Conn, dst netip.AddrPort) (*session, error) {
	s := newSession(c, dst)
	if err := c.SetDeadline(time.Now().Add(i.cfg.DetectTimeout)); err != nil {
		return nil, fmt.Errorf("set deadline: %w", err)
	}
	prefix, err := i.sniff(c)
	if err != nil {
		return nil, err
	}
	s.conn = detect.NewConn(c, prefix)
	if tlsid.LooksLikeTLS(prefix) {
		s.sni, _ = serverName(prefix)
		// Terminated only when it names this proxy's identity, as linkerd2-proxy does: a
		// client of the application's own TLS sends another name, or none (one that dials by
		// IP), and must reach the application's certificate.
		switch {
		case i.tls == nil:
			s.passthrough = true
		case s.sni == "" || !strings.EqualFold(strings.TrimSuffix(s.sni, "."), i.cfg.Identity):
			s.passthrough = true
		default:
			if err := i.terminate(ctx, s); err != nil {
				return nil, err
			}
		}
	}
	switch {
	case s.header:
	case dst.IsValid():
		s.port = dst.Port()
	case i.cfg.DefaultPort != 0:
		s.port = i.cfg.DefaultPort
	default:
		return nil, errNoPort
	}
	if s.port == i.listenPort() {
		return nil, fmt.Errorf("target port %d is the inbound port itself", s.port)
	}
	if err := c.SetDeadline(time.Time{}); err != nil {
		return nil, fmt.Errorf("clear deadline: %w", err)
	}
	return s, nil
}

// newSession is the session of connection c (redirected from dst, when valid) before anything
// is read from it.
func newSession(c net.Conn, dst netip.AddrPort) *session {
	s := &session{dst: dst, conn: c}
	if ap, err := netip.ParseAddrPort(c.RemoteAddr().String()); err == nil {
		s.client.Addr = ap.Addr().Unmap()
	}
	if a, ok := c.LocalAddr().(*net.TCPAddr); ok && !dst.IsValid() {
		s.local = a.AddrPort().Addr().Unmap() // appAddr's target when there is no original destination
	}
	return s
}

// sniff reads the connection's first bytes: at least two, and when they start a TLS
// record and the SNI matters, the whole record (to read the ClientHello's server name). It
// returns a copy of what it read, which the session replays.
func (i *Inbound) sniff(c net.Conn) ([]byte, error) {
	bp := sniffPool.Get().(*[]byte)
	defer sniffPool.Put(bp)
	buf := *bp
	n := 0
	want := 2
	for n < want {
		m, err := c.Read(buf[n:])
		n += m
		if n >= 2 && tlsid.LooksLikeTLS(buf[:n]) && i.tls != nil && i.cfg.Identity != "" {
			want = recordHeaderLen
			if l, ok := recordLen(buf[:n]); ok {
				want = l
			}
		}
		if err != nil {
			if n > 0 && errors.Is(err, io.EOF) {
				break // what there is, is all there is
			}
			if n == 0 && errors.Is(err, io.EOF) {
				return nil, io.EOF
			}
			return nil, fmt.Errorf("read preamble after %d bytes: %w", n, err)
		}
	}
	return append([]byte(nil), buf[:n]...), nil
}

// terminate runs the TLS handshake and, with ALPN transport.l5d.io/v1, reads the header.
func (i *Inbound) terminate(ctx context.Context, s *session) error {
	tc := tls.Server(s.conn, i.tls)
	if err := tc.HandshakeContext(ctx); err != nil {
		return fmt.Errorf("TLS handshake: %w", err)
	}
	cs := tc.ConnectionState()
	s.conn, s.client.TLS = tc, true
	if id, err := tlsid.PeerIdentity(cs); err == nil {
		s.client.Identity = id
	}
	if cs.NegotiatedProtocol != transportheader.ALPN {
		return nil
	}
	if s.client.Identity == "" {
		// As linkerd2-proxy: a connection that names its own target port reaches whatever
		// listens there, so only a meshed client may make one.
		return errHeaderWithoutIdentity
	}
	h, err := transportheader.Read(tc)
	if err != nil {
		return fmt.Errorf("transport header: %w", err)
	}
	s.header, s.port, s.proto = true, h.Port, h.Protocol
	return nil
}

// errHeaderWithoutIdentity refuses a transport header from a client without a certificate.
var errHeaderWithoutIdentity = errors.New("transport header from a client without an identity: direct connections must be mutually authenticated")

func (i *Inbound) listenPort() uint16 {
	if a, ok := i.Addr().(*net.TCPAddr); ok {
		return uint16(a.Port)
	}
	return 0
}

// appAddr is where the application listens for the session's port: the original
// destination of a redirected connection, else (a transport header, or the default port) the
// port at the address the client connected to, the pod's, as linkerd2-proxy dials it. Not
// 127.0.0.1: a client must not reach what the pod serves on loopback only (its proxy's own
// outbound listener among them).
func (i *Inbound) appAddr(s *session) string {
	if i.cfg.AppAddr != nil {
		return i.cfg.AppAddr(s.port)
	}
	host := "127.0.0.1"
	switch {
	case s.dst.IsValid():
		host = s.dst.Addr().Unmap().String()
	case s.local.IsValid() && !s.local.IsUnspecified():
		host = s.local.String()
	}
	return net.JoinHostPort(host, strconv.Itoa(int(s.port)))
}

// serveConn handles one accepted connection.
func (i *Inbound) serveConn(ctx context.Context, c *trackedConn) {
	origDst := i.origDst
	if origDst == nil {
		origDst = origdst.OriginalDst
	}
	dst, err := origDst(c)
	if err != nil {
		dst = netip.AddrPort{}
	}
	// A redirected connection's port is looked up before anything is read: a port that is
	// opaque (by configuration or policy) is proxied as TCP without reading first, as
	// linkerd2-proxy skips detection there: its application may speak first (MySQL, SMTP),
	// and the client waits for it. Meshed clients reach it with the transport header, on the
	// inbound port.
	var port *policy.Port
	if dst.IsValid() && dst.Port() != i.listenPort() {
		port = i.watcher.Lookup(ctx, dst.Port())
		if i.opaque[dst.Port()] || port.Policy().Protocol == policy.Opaque {
			c.onClose(port.Release)
			if ctx.Err() != nil { // shutting down: no connection starts now
				_ = c.Close()
				return
			}
			s := newSession(c, dst)
			s.port = dst.Port()
			i.serveTCP(ctx, s, port, i.appAddr(s))
			return
		}
	}
	s, err := i.preamble(ctx, c, dst)
	if err != nil {
		if port != nil {
			port.Release()
		}
		if !errors.Is(err, io.EOF) {
			i.log.Debug("inbound: connection refused in its preamble", zap.Stringer("client", c.RemoteAddr()), zap.Error(err))
		}
		_ = c.Close()
		return
	}
	// The port looked up before the preamble serves, unless a transport header named
	// another; without an original destination, it is looked up now.
	if port != nil && s.port != dst.Port() {
		port.Release()
		port = nil
	}
	if port == nil {
		port = i.watcher.Lookup(ctx, s.port)
	}
	c.onClose(port.Release)
	if ctx.Err() != nil { // shutting down: no connection starts now
		_ = c.Close()
		return
	}
	srv := port.Policy()
	isHTTP, h2, conn, err := i.protocol(ctx, s, srv)
	if err != nil {
		i.log.Debug("inbound: protocol detection failed", zap.Stringer("client", c.RemoteAddr()), zap.Error(err))
		_ = c.Close()
		return
	}
	s.conn = conn
	target := i.appAddr(s)
	if isHTTP {
		i.serveHTTP(c, s, port, target, h2)
		return
	}
	i.serveTCP(ctx, s, port, target)
}

// protocol decides whether the session carries HTTP, detecting it when nothing says; h2
// reports HTTP/2 known as such (HTTP/2 with prior knowledge).
func (i *Inbound) protocol(ctx context.Context, s *session, srv *policy.Server) (isHTTP, h2 bool, _ net.Conn, _ error) {
	switch {
	case s.passthrough:
		return false, false, s.conn, nil
	case s.header:
		return s.proto != transportheader.Opaque, s.proto == transportheader.HTTP2, s.conn, nil
	case i.opaque[s.port] || srv.Protocol == policy.Opaque || srv.Protocol == policy.TLS:
		return false, false, s.conn, nil
	case srv.Protocol == policy.HTTP2 || srv.Protocol == policy.GRPC:
		return true, true, s.conn, nil
	case srv.Protocol == policy.HTTP1:
		return true, false, s.conn, nil
	}
	timeout := srv.DetectTimeout
	if timeout <= 0 {
		timeout = i.cfg.DetectTimeout
	}
	res, err := detect.Peek(ctx, s.conn, detect.Config{Timeout: timeout})
	if err != nil {
		return false, false, nil, err
	}
	return res.Protocol == detect.HTTP1 || res.Protocol == detect.HTTP2, res.Protocol == detect.HTTP2, res.Conn, nil
}
