package serve

import (
	"fmt"
	"net"
	"net/netip"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// GRPC says how a process serves its gRPC API.
type GRPC struct {
	// Addr is the API's address.
	Addr string
	// Creds are its transport credentials (the control plane's mTLS, from internal/cptls);
	// nil serves plaintext.
	Creds credentials.TransportCredentials
	// LocalAddr, when set, is a second listener of the same API on a loopback address, served
	// in plaintext whatever Creds say: for tools on the same host, or reaching the pod through
	// `kubectl port-forward`, which connects to the pod's loopback interface. Only a process
	// in the same network namespace reaches it, so it must be a loopback address.
	LocalAddr string
	// Options are the component's own gRPC server options, after Meridian's defaults (the
	// destination replica's codec: shard.ServerOptions).
	Options []grpc.ServerOption
}

// CheckLocalAddr refuses a local listener address whose host is not a loopback IP address or
// "localhost".
func CheckLocalAddr(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("local address %q: %w", addr, err)
	}
	if host == "localhost" {
		return nil
	}
	ip, err := netip.ParseAddr(host)
	if err != nil || !ip.IsLoopback() {
		return fmt.Errorf("local address %q: the plaintext listener must be on a loopback address (127.0.0.1:PORT or [::1]:PORT), so that only this host or pod reaches it", addr)
	}
	return nil
}

// localConn marks a connection accepted on the local listener.
type localConn struct{ net.Conn }

// NetConn returns the connection c wraps (grpcserver reads through it whether it is closed).
func (c *localConn) NetConn() net.Conn { return c.Conn }

var _ interface{ NetConn() net.Conn } = (*localConn)(nil)

// localListener marks every connection it accepts as local.
type localListener struct{ net.Listener }

func (l localListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &localConn{c}, nil
}

// localAware serves the process's credentials on every connection but those of the local
// listener, which are served in plaintext.
type localAware struct {
	credentials.TransportCredentials
}

func (c localAware) ServerHandshake(conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	if _, ok := conn.(*localConn); ok {
		return insecure.NewCredentials().ServerHandshake(conn)
	}
	return c.TransportCredentials.ServerHandshake(conn)
}

func (c localAware) Clone() credentials.TransportCredentials {
	return localAware{c.TransportCredentials.Clone()}
}
