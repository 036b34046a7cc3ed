package outbound

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	"github.com/meridian-mesh/meridian/proxy/internal/rawio"
	"github.com/meridian-mesh/meridian/proxy/metrics"
	"github.com/meridian-mesh/meridian/proxy/transportheader"
)

// connectError is a failure to establish a connection to an endpoint: the dial, the TLS
// handshake (a peer without the expected identity among them) or the transport header. No
// byte of any request was sent on it, so the request may go to another endpoint.
type connectError struct {
	addr string
	err  error
}

func (e *connectError) Error() string { return fmt.Sprintf("connect to %s: %v", e.addr, e.err) }
func (e *connectError) Unwrap() error { return e.err }

// isConnectError reports whether err, as returned by a Transport or a dial, is a
// connectError.
func isConnectError(err error) bool {
	var ce *connectError
	return errors.As(err, &ce)
}

// errLoop is the connect error for a connection to the proxy's own outbound listener (a
// request for 127.0.0.1:4140, or a name that resolves to it), which would forward itself to
// itself until the proxy runs out of connections (linkerd2-proxy's PreventLoop).
var errLoop = errors.New("the target is this proxy's own outbound listener: refused, it would loop")

// isSelf reports whether a connection to remote reached the outbound listener: its address,
// or a loopback address at its port when it listens on every address.
func (o *Outbound) isSelf(remote net.Addr) bool {
	ra, ok := remote.(*net.TCPAddr)
	la, ok2 := o.Addr().(*net.TCPAddr)
	if !ok || !ok2 || ra.Port != la.Port {
		return false
	}
	return ra.IP.Equal(la.IP) || (la.IP.IsUnspecified() && ra.IP.IsLoopback())
}

// errNoTLS is the connect error for a meshed endpoint when the proxy has no TLS identity.
var errNoTLS = errors.New("endpoint is meshed and the proxy has no TLS identity")

// dial connects to the endpoint for a session of protocol proto (HTTP1, HTTP2 or Opaque):
// plaintext when the endpoint is not meshed; else TLS 1.3 verifying the endpoint's identity,
// to its port (ALPN by protocol) or, with an opaque-transport port, to that port with ALPN
// transport.l5d.io/v1 followed by the transport header. All of it within ConnectTimeout. Every
// failure is a *connectError. The connection returned counts its bytes in the endpoint's
// tcp_* series.
func (e *endpoint) dial(ctx context.Context, proto transportheader.SessionProtocol) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, e.o.cfg.ConnectTimeout)
	defer cancel()
	raw, err := rawio.Dial(ctx, e.o.dialerFor(e.dialAddr), "tcp", e.dialAddr)
	if err != nil {
		return nil, &connectError{e.dialAddr, err}
	}
	if proto == transportheader.HTTP2 {
		ordinary(raw)
	}
	if e.o.isSelf(raw.RemoteAddr()) {
		_ = raw.Close()
		return nil, &connectError{e.dialAddr, errLoop}
	}
	if e.tls[proto] == nil {
		if e.disc.Identity != "" {
			_ = raw.Close()
			return nil, &connectError{e.dialAddr, errNoTLS}
		}
		return e.metered(raw), nil
	}
	tc := tls.Client(raw, e.tls[proto])
	if err := tc.HandshakeContext(ctx); err != nil {
		_ = raw.Close()
		return nil, &connectError{e.dialAddr, fmt.Errorf("TLS with %s: %w", e.disc.Identity, err)}
	}
	if hdr := e.header[proto]; hdr != nil {
		if err := writeHeader(ctx, tc, hdr); err != nil {
			_ = raw.Close()
			return nil, &connectError{e.dialAddr, err}
		}
	}
	return e.metered(tc), nil
}

// writeHeader checks that the peer agreed to the opaque transport and writes the header.
func writeHeader(ctx context.Context, tc *tls.Conn, hdr []byte) error {
	if p := tc.ConnectionState().NegotiatedProtocol; p != transportheader.ALPN {
		return fmt.Errorf("peer negotiated ALPN %q, not %s", p, transportheader.ALPN)
	}
	deadline, _ := ctx.Deadline()
	if err := tc.SetWriteDeadline(deadline); err != nil {
		return fmt.Errorf("transport header: %w", err)
	}
	if _, err := tc.Write(hdr); err != nil {
		return fmt.Errorf("write transport header: %w", err)
	}
	if err := tc.SetWriteDeadline(time.Time{}); err != nil {
		return fmt.Errorf("transport header: %w", err)
	}
	return nil
}

func (e *endpoint) metered(c net.Conn) net.Conn {
	e.tcp.Open()
	return &meteredConn{Conn: c, tcp: e.tcp}
}

// meteredConn counts a connection to an endpoint in the tcp_* series: open until Close,
// bytes as they are read and written.
type meteredConn struct {
	net.Conn
	tcp    *metrics.TCP
	closed atomic.Bool
	failed atomic.Bool
}

func (c *meteredConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.tcp.Read(int64(n))
	}
	if err != nil && !isEOF(err) && !c.closed.Load() { // not our own Close
		c.failed.Store(true)
	}
	return n, err
}

func (c *meteredConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	if n > 0 {
		c.tcp.Wrote(int64(n))
	}
	if err != nil && !c.closed.Load() {
		c.failed.Store(true)
	}
	return n, err
}

// Close closes the connection and counts it closed, once; a read or write failing because
// of it does not count as a failure.
func (c *meteredConn) Close() error {
	first := c.closed.CompareAndSwap(false, true)
	err := c.Conn.Close()
	if first {
		c.tcp.Close(c.failed.Load())
	}
	return err
}

// CloseWrite half-closes the connection (TCP FIN, or TLS close_notify), so a tunnel passes
// the client's end of stream on.
func (c *meteredConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errors.ErrUnsupported
}
