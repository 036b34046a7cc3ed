package inbound

import (
	"context"
	"errors"
	"io"
	"net"

	"github.com/meridian-mesh/meridian/proxy/inbound/policy"
	"github.com/meridian-mesh/meridian/proxy/metrics"
	"go.uber.org/zap"
)

// serveTCP authorizes an opaque connection and copies it to and from the application until
// both sides are done, the policy stops allowing it, or the drain closes it.
func (i *Inbound) serveTCP(ctx context.Context, s *session, port *policy.Port, target string) {
	defer s.conn.Close()
	// The channel first, then the policy: a change between the two reads closes the channel
	// already, so the loop below checks the connection against it.
	changed := port.Changed()
	srv := port.Policy()
	az := metrics.Authz{SrvName: srv.Name, ClientID: s.client.Identity, TLS: s.tlsLabel()}
	authz := srv.AuthorizeTCP(s.client)
	if authz == nil {
		i.metrics.TCPAuthz(false, az)
		i.log.Debug("inbound: connection denied", zap.String("server", srv.Name), zap.Uint16("port", s.port),
			zap.Stringer("client", s.client.Addr), zap.String("client_id", s.client.Identity))
		return
	}
	az.AuthzName = authz.Name
	i.metrics.TCPAuthz(true, az)

	up, err := i.dial(ctx, "tcp", target)
	if err != nil {
		i.log.Debug("inbound: connect to the application failed", zap.String("app", target), zap.Error(err))
		return
	}
	defer up.Close()
	m := i.metrics.TCP(metrics.Labels{Direction: "inbound", Authority: target, TLS: s.tlsLabel(),
		ClientID: s.client.Identity, SrvName: srv.Name})
	m.Open()

	done := make(chan error, 2)
	go func() { done <- pipe(up, s.conn, m.Read) }()  // client -> application
	go func() { done <- pipe(s.conn, up, m.Wrote) }() // application -> client
	var failed bool
	for pending := 2; pending > 0; {
		select {
		case err := <-done:
			pending--
			if err != nil {
				failed = failed || !errors.Is(err, errClosed)
				_ = s.conn.Close() // unblock the other direction
				_ = up.Close()
			}
		case <-changed:
			changed = port.Changed()
			srv = port.Policy()
			if srv.AuthorizeTCP(s.client) == nil {
				i.metrics.TCPAuthz(false, metrics.Authz{SrvName: srv.Name, ClientID: s.client.Identity, TLS: s.tlsLabel()})
				i.log.Debug("inbound: connection no longer authorized: closing", zap.String("server", srv.Name), zap.Uint16("port", s.port))
				_ = s.conn.Close()
				_ = up.Close()
			}
		}
	}
	m.Close(failed)
}

// errClosed ends a copy whose connection was closed on purpose.
var errClosed = errors.New("connection closed")

// pipe copies src to dst through a pooled buffer, counting the bytes with count, then
// half-closes dst (or closes it when it cannot half-close). A clean end of src is nil.
func pipe(dst, src net.Conn, count func(int64)) error {
	bp := copyPool.Get().(*[]byte)
	defer copyPool.Put(bp)
	buf := *bp
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				if errors.Is(werr, net.ErrClosed) {
					return errClosed
				}
				return werr
			}
			count(int64(n))
		}
		if errors.Is(err, io.EOF) {
			if cw, ok := dst.(interface{ CloseWrite() error }); ok && cw.CloseWrite() == nil {
				return nil
			}
			return dst.Close()
		}
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return errClosed // closed by the other direction, a policy change or the drain
			}
			return err
		}
	}
}
