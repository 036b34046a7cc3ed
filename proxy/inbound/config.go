package inbound

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/meridian-mesh/meridian/internal/tlsid"
	"github.com/meridian-mesh/meridian/proxy/inbound/policy"
	"github.com/meridian-mesh/meridian/proxy/metrics"
	"go.uber.org/zap"
	"google.golang.org/grpc"
)

// Config configures the inbound proxy. Build it with DefaultConfig; the zero value of a
// duration or bound means its default.
type Config struct {
	// ListenAddr is where the proxy listens (LINKERD2_PROXY_INBOUND_LISTEN_ADDR):
	// 0.0.0.0:4143; the local mesh uses <pod ip>:4143.
	ListenAddr string
	// Identity is the proxy's own identity (LINKERD2_PROXY_IDENTITY_LOCAL_NAME). TLS whose
	// SNI names another server is the application's and is passed through; empty: every TLS
	// connection is terminated.
	Identity string
	// Workload is the policy workload (LINKERD2_PROXY_POLICY_WORKLOAD, {"ns":..,"pod":..});
	// empty: no policy streams, every port gets DefaultPolicy.
	Workload string
	// DefaultPolicy applies to a port until the policy service answered for it
	// (LINKERD2_PROXY_INBOUND_DEFAULT_POLICY): deny, all-authenticated,
	// all-unauthenticated (the default), cluster-authenticated, cluster-unauthenticated or
	// audit.
	DefaultPolicy string
	// ClusterNetworks are the networks of the cluster-* default policies
	// (LINKERD2_PROXY_POLICY_CLUSTER_NETWORKS): by default Linkerd's private ranges.
	ClusterNetworks []netip.Prefix
	// Ports are the application's ports (LINKERD2_PROXY_INBOUND_PORTS); their policies are
	// watched from the start.
	Ports []uint16
	// OpaquePorts skip protocol detection (LINKERD2_PROXY_INBOUND_PORTS_DISABLE_PROTOCOL_DETECTION).
	OpaquePorts []uint16
	// DefaultPort is the target port of a connection with neither a transport header nor an
	// original destination; 0 closes such connections.
	DefaultPort uint16
	// AppAddr returns where the application listens for a port; nil: the connection's
	// original destination address, or 127.0.0.1, with the port.
	AppAddr func(port uint16) string
	// DetectTimeout bounds the connection preamble (TLS handshake and transport header) and
	// protocol detection when the policy names no timeout: 10 s.
	DetectTimeout time.Duration
	// ConnectTimeout bounds connecting to the application (LINKERD2_PROXY_INBOUND_CONNECT_TIMEOUT): 1 s.
	ConnectTimeout time.Duration
	// Grace is how long in-flight requests and connections may finish after Run's context
	// ends (LINKERD2_PROXY_SHUTDOWN_GRACE_PERIOD): 10 s.
	Grace time.Duration
	// MaxConns bounds open inbound connections (10000); a connection beyond it is closed at
	// once. So that no client holds the slots it does not use, an HTTP/1 connection waiting
	// for its next request, or an HTTP/2 connection without a stream, closes after
	// IdleTimeout, and an HTTP/1 client refused with 403 is disconnected after the answer
	// (Connection: close). An HTTP/2 connection is not: a client proxy multiplexes the
	// requests of many routes on it, and policy decides by route.
	MaxConns int
	// IdleTimeout closes an HTTP/1 client connection idle between requests for this long,
	// and sends a GOAWAY to an HTTP/2 client without a stream for this long (within a
	// quarter of it more). 5 min: longer than client proxies keep idle connections pooled,
	// 90 s, so that they never reuse one the server is closing.
	IdleTimeout time.Duration
	// MaxIdleConnsPerApp bounds the idle HTTP/1.1 connections kept to each application
	// address (256).
	MaxIdleConnsPerApp int
	// Policy tunes the policy streams (timeouts, backoff, bounds); its Workload and Ports are
	// taken from the fields above.
	Policy policy.WatchConfig
}

// Defaults.
const (
	DefaultListenAddr     = "0.0.0.0:4143"
	DefaultDetectTimeout  = 10 * time.Second
	DefaultConnectTimeout = time.Second
	DefaultGrace          = 10 * time.Second
	DefaultMaxConns       = 10000
	DefaultIdleTimeout    = 5 * time.Minute
)

// DefaultClusterNetworks are Linkerd's default cluster networks.
var DefaultClusterNetworks = []netip.Prefix{
	netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("172.16.0.0/12"), netip.MustParsePrefix("192.168.0.0/16"),
	netip.MustParsePrefix("fd00::/8"),
}

// DefaultConfig returns the defaults documented on Config.
func DefaultConfig() Config {
	return Config{
		ListenAddr:         DefaultListenAddr,
		DefaultPolicy:      policy.DefaultAllUnauthenticated,
		ClusterNetworks:    DefaultClusterNetworks,
		DetectTimeout:      DefaultDetectTimeout,
		ConnectTimeout:     DefaultConnectTimeout,
		Grace:              DefaultGrace,
		MaxConns:           DefaultMaxConns,
		IdleTimeout:        DefaultIdleTimeout,
		MaxIdleConnsPerApp: 256,
		Policy:             policy.DefaultWatchConfig(),
	}
}

func (c *Config) fill() {
	d := DefaultConfig()
	if c.ListenAddr == "" {
		c.ListenAddr = d.ListenAddr
	}
	if c.DefaultPolicy == "" {
		c.DefaultPolicy = d.DefaultPolicy
	}
	if c.ClusterNetworks == nil {
		c.ClusterNetworks = d.ClusterNetworks
	}
	if c.DetectTimeout <= 0 {
		c.DetectTimeout = d.DetectTimeout
	}
	if c.ConnectTimeout <= 0 {
		c.ConnectTimeout = d.ConnectTimeout
	}
	if c.Grace <= 0 {
		c.Grace = d.Grace
	}
	if c.MaxConns <= 0 {
		c.MaxConns = d.MaxConns
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = d.IdleTimeout
	}
	if c.MaxIdleConnsPerApp <= 0 {
		c.MaxIdleConnsPerApp = d.MaxIdleConnsPerApp
	}
	c.Policy.Workload, c.Policy.Ports = c.Workload, c.Ports
}

// Deps are what New needs besides its Config.
type Deps struct {
	// TLS terminates mesh TLS with the proxy's certificate; nil: no termination (every TLS
	// connection passes through to the application).
	TLS *tlsid.Config
	// PolicyConn reaches the policy service (InboundServerPolicies); nil: DefaultPolicy
	// everywhere.
	PolicyConn grpc.ClientConnInterface
	// Metrics records the proxy's metrics; nil: a registry-less set.
	Metrics *metrics.Metrics
	// Logger logs connection failures at debug and policy problems at warn; nil: none.
	Logger *zap.Logger
	// OriginalDst reads a connection's original destination; nil: origdst.OriginalDst
	// (SO_ORIGINAL_DST, after proxy-init's redirect). A seam for tests.
	OriginalDst func(net.Conn) (netip.AddrPort, error)
}

// serverALPN are the protocols the proxy offers when terminating TLS, in preference order.
var serverALPN = []string{"transport.l5d.io/v1", "h2", "http/1.1"}

func (c *Config) validate() (*policy.Server, error) {
	fallback, err := policy.Default(c.DefaultPolicy, c.ClusterNetworks, c.DetectTimeout)
	if err != nil {
		return nil, fmt.Errorf("inbound: %w", err)
	}
	return fallback, nil
}

// serverTLS is the configuration for terminating mesh TLS.
func serverTLS(cfg *tlsid.Config) *tls.Config {
	if cfg == nil {
		return nil
	}
	return cfg.Server(serverALPN...)
}
