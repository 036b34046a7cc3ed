package origdst

import (
	"errors"
	"net"
	"net/netip"
)

var (
	// ErrNotRedirected: the connection reached the listener directly.
	ErrNotRedirected = errors.New("origdst: connection was not redirected")
	// ErrUnsupported: the platform or the connection type has no original destination.
	ErrUnsupported = errors.New("origdst: original destination not available")
)

// OriginalDst returns the address the client of c dialled before it was redirected to the
// proxy. c must be the accepted *net.TCPConn itself, or a wrapper that exposes it through
// a NetConn() net.Conn method (as tls.Conn and detect.Conn do).
func OriginalDst(c net.Conn) (netip.AddrPort, error) {
	for {
		if tc, ok := c.(*net.TCPConn); ok {
			return originalDst(tc)
		}
		u, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			return netip.AddrPort{}, ErrUnsupported
		}
		c = u.NetConn()
	}
}
