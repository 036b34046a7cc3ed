package outbound

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"go.uber.org/zap"

	"github.com/meridian-mesh/meridian/internal/tlsid"
	"github.com/meridian-mesh/meridian/proxy/balance"
	"github.com/meridian-mesh/meridian/proxy/discovery"
	"github.com/meridian-mesh/meridian/proxy/metrics"
)

// Resolver is the discovery seam: *discovery.Resolver in production. Resolve returns once the
// target's first answer arrived or ctx ended; it returns an error wrapping
// discovery.ErrNotMeshName for a name the destination refuses. It is called from many
// goroutines at once and must be safe for concurrent use.
type Resolver interface {
	Resolve(ctx context.Context, authority string) (Target, error)
}

// ResolverOf adapts a resolver whose Resolve returns its own target type (the discovery
// package's *discovery.Target): outbound.ResolverOf(resolver.Resolve). A failed Resolve gives
// a nil Target, never a typed nil.
func ResolverOf[T Target](resolve func(ctx context.Context, authority string) (T, error)) Resolver {
	return resolverFunc[T](resolve)
}

type resolverFunc[T Target] func(ctx context.Context, authority string) (T, error)

func (f resolverFunc[T]) Resolve(ctx context.Context, authority string) (Target, error) {
	t, err := f(ctx, authority)
	if err != nil {
		return nil, err
	}
	return t, nil
}

// Target is one resolved authority. Snapshot is lock-free and may be called from any
// goroutine; Changed returns a channel closed at the next change (call Snapshot and Changed
// again then; take Changed before Snapshot so no change is missed). Release says the holder
// is done with it; Outbound calls it exactly once per Resolve that succeeded.
type Target interface {
	Snapshot() *discovery.Snapshot
	Changed() <-chan struct{}
	Release()
}

// DefaultOpaquePorts are linkerd2-proxy's default opaque ports (SMTP, MySQL, Galera, Postgres,
// Redis, Elasticsearch, Memcached): no protocol detection on them.
var DefaultOpaquePorts = []uint16{25, 587, 3306, 4444, 5432, 6379, 9300, 11211}

// Config tunes the outbound side. DefaultConfig gives linkerd2-proxy's values; a zero field
// means its default.
type Config struct {
	// ListenAddr is where Run listens (LINKERD2_PROXY_OUTBOUND_LISTEN_ADDR, 127.0.0.1:4140).
	ListenAddr string
	// ConnectTimeout bounds a connection to an endpoint: the dial, the TLS handshake and the
	// transport header (LINKERD2_PROXY_OUTBOUND_CONNECT_TIMEOUT, 1 s).
	ConnectTimeout time.Duration
	// DetectTimeout bounds protocol detection (10 s); an undecided connection is opaque TCP.
	DetectTimeout time.Duration
	// ResolveTimeout bounds the first resolution of a target (3 s, linkerd2-proxy's outbound
	// fail-fast timeout); a request waiting longer fails with 503.
	ResolveTimeout time.Duration
	// IdleTimeout is how long a target no request or connection uses is kept, with its
	// balancers and connection pools, before it is released
	// (LINKERD2_PROXY_OUTBOUND_DISCOVERY_IDLE_TIMEOUT, 5 s).
	IdleTimeout time.Duration
	// Grace is how long Run lets in-flight requests and tunnels finish once its context
	// ended (LINKERD2_PROXY_SHUTDOWN_GRACE_PERIOD's share for outbound; 30 s).
	Grace time.Duration
	// OpaquePorts skip protocol detection (DefaultOpaquePorts). Nil means the default; an
	// empty non-nil slice means none.
	OpaquePorts []uint16
	// ClusterSuffixes are the DNS suffixes of cluster names: for transparent HTTP a Host under
	// one of them is the target, any other Host is ignored for the original destination
	// (LINKERD2_PROXY_DESTINATION_PROFILE_SUFFIXES, "svc.cluster.local."). "." matches
	// every name.
	ClusterSuffixes []string
	// MaxIdlePerEndpoint bounds the idle HTTP/1.1 connections kept per endpoint (100); more
	// are closed when their request ends.
	MaxIdlePerEndpoint int
	// PoolIdleTimeout closes an upstream connection idle for this long (90 s).
	PoolIdleTimeout time.Duration
	// MaxHeaderBytes bounds a client request's head (64 KiB), as proxy/httpproxy does.
	MaxHeaderBytes int
	// Balance tunes the balancers (balance.DefaultConfig: Linkerd's RTT, decay, penalty).
	Balance balance.Config
	// SourceAddr, when valid, is the local address connections to endpoints are made from
	// (the local mesh: a pod is a loopback address, and its peers' inbound proxies must see
	// it, not 127.0.0.1, which Linkerd's inbound policy always allows). A loopback
	// SourceAddr applies to loopback destinations only; connections elsewhere (a direct
	// target on another host) get the kernel's choice, as they do when it is invalid.
	SourceAddr netip.Addr
}

// DefaultConfig returns linkerd2-proxy's outbound settings.
func DefaultConfig() Config {
	return Config{
		ListenAddr:         "127.0.0.1:4140",
		ConnectTimeout:     time.Second,
		DetectTimeout:      10 * time.Second,
		ResolveTimeout:     3 * time.Second,
		IdleTimeout:        5 * time.Second,
		Grace:              30 * time.Second,
		OpaquePorts:        append([]uint16(nil), DefaultOpaquePorts...),
		ClusterSuffixes:    []string{"svc.cluster.local."},
		MaxIdlePerEndpoint: 100,
		PoolIdleTimeout:    90 * time.Second,
		MaxHeaderBytes:     64 << 10,
		Balance:            balance.DefaultConfig(),
	}
}

// withDefaults fills the zero fields of c.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	set := func(v *time.Duration, def time.Duration) {
		if *v == 0 {
			*v = def
		}
	}
	if c.ListenAddr == "" {
		c.ListenAddr = d.ListenAddr
	}
	set(&c.ConnectTimeout, d.ConnectTimeout)
	set(&c.DetectTimeout, d.DetectTimeout)
	set(&c.ResolveTimeout, d.ResolveTimeout)
	set(&c.IdleTimeout, d.IdleTimeout)
	set(&c.Grace, d.Grace)
	set(&c.PoolIdleTimeout, d.PoolIdleTimeout)
	if c.OpaquePorts == nil {
		c.OpaquePorts = d.OpaquePorts
	}
	if c.ClusterSuffixes == nil {
		c.ClusterSuffixes = d.ClusterSuffixes
	}
	if c.MaxIdlePerEndpoint == 0 {
		c.MaxIdlePerEndpoint = d.MaxIdlePerEndpoint
	}
	if c.MaxHeaderBytes == 0 {
		c.MaxHeaderBytes = d.MaxHeaderBytes
	}
	return c
}

func (c Config) validate() error {
	for name, v := range map[string]time.Duration{"ConnectTimeout": c.ConnectTimeout, "DetectTimeout": c.DetectTimeout,
		"ResolveTimeout": c.ResolveTimeout, "IdleTimeout": c.IdleTimeout, "Grace": c.Grace, "PoolIdleTimeout": c.PoolIdleTimeout} {
		if v < 0 {
			return fmt.Errorf("outbound: %s is negative (%v)", name, v)
		}
	}
	if c.MaxIdlePerEndpoint < 0 || c.MaxHeaderBytes < 0 {
		return errors.New("outbound: MaxIdlePerEndpoint and MaxHeaderBytes must not be negative")
	}
	for _, p := range c.OpaquePorts {
		if p == 0 {
			return errors.New("outbound: opaque port 0")
		}
	}
	return nil
}

// Deps are what Outbound runs with.
type Deps struct {
	// Resolver resolves target authorities (required).
	Resolver Resolver
	// TLS originates mTLS to meshed endpoints. Nil refuses meshed endpoints (a connection
	// error): the proxy never sends meshed traffic in plaintext.
	TLS *tlsid.Config
	// Metrics records the outbound series (nil: a private, unregistered set).
	Metrics *metrics.Metrics
	// Log logs connection-level failures at debug and the lifecycle at info (nil: none).
	Log *zap.Logger
	// OriginalDst returns a connection's original destination (nil: origdst.OriginalDst,
	// SO_ORIGINAL_DST on Linux, none elsewhere, so every connection is explicit). It is
	// called once per accepted connection, with the connection as the proxy reads it: on
	// Linux a rawio.Conn, whose NetConn is the *net.TCPConn (origdst looks through it).
	OriginalDst func(net.Conn) (netip.AddrPort, error)
}
