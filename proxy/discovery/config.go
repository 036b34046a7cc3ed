package discovery

import (
	"errors"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
)

// Config configures a Resolver. Build it with DefaultConfig; cmd/ fills it from the
// LINKERD2_PROXY_DESTINATION_* environment and flags.
type Config struct {
	// Addr is the destination service's address (LINKERD2_PROXY_DESTINATION_SVC_ADDR): where
	// every target is first resolved, and where the resolver goes back to when a replica it
	// learnt as a service's owner goes away. Required.
	Addr string
	// ContextToken is sent in every request (LINKERD2_PROXY_DESTINATION_CONTEXT).
	ContextToken string
	// IdleTimeout is how long a target no one holds keeps its streams before they are
	// cancelled (LINKERD2_PROXY_OUTBOUND_DISCOVERY_IDLE_TIMEOUT; 5 s outbound, 90 s inbound).
	IdleTimeout time.Duration
	// DefaultPort is the port of an authority without one (80).
	DefaultPort uint16
	// ClusterDomain names the services whose owners the resolver remembers:
	// <svc>.<ns>.svc.<ClusterDomain> ("cluster.local").
	ClusterDomain string
	// BackoffMin and BackoffMax bound the exponential backoff (with jitter) between attempts
	// of a stream that failed: 100 ms doubling to 5 s; reset once a stream delivers and stays
	// up for BackoffMax (which also resets the count of redirects in a row).
	BackoffMin, BackoffMax time.Duration
	// MaxRedirects is how many redirects in a row a stream follows at once; after that it
	// backs off before each (replicas' ring views differ briefly after a change). 3.
	MaxRedirects int
}

// DefaultConfig returns Linkerd's outbound defaults, without Addr.
func DefaultConfig() Config {
	return Config{
		IdleTimeout:   5 * time.Second,
		DefaultPort:   80,
		ClusterDomain: "cluster.local",
		BackoffMin:    100 * time.Millisecond,
		BackoffMax:    5 * time.Second,
		MaxRedirects:  3,
	}
}

// withDefaults fills the zero fields of c from DefaultConfig and normalises ClusterDomain.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = d.IdleTimeout
	}
	if c.DefaultPort == 0 {
		c.DefaultPort = d.DefaultPort
	}
	c.ClusterDomain = strings.ToLower(strings.Trim(c.ClusterDomain, "."))
	if c.ClusterDomain == "" {
		c.ClusterDomain = d.ClusterDomain
	}
	if c.BackoffMin <= 0 {
		c.BackoffMin = d.BackoffMin
	}
	if c.BackoffMax < c.BackoffMin {
		c.BackoffMax = max(d.BackoffMax, c.BackoffMin)
	}
	if c.MaxRedirects <= 0 {
		c.MaxRedirects = d.MaxRedirects
	}
	return c
}

// Conns gives the resolver its control-plane connections: one per address (the destination
// service, and each replica a redirect names). The caller decides plaintext or mTLS and owns
// the connections. Conn is called concurrently, on every stream attempt; it should return a
// cached connection and must not block on the network (grpc.NewClient connects lazily).
type Conns interface {
	Conn(addr string) (grpc.ClientConnInterface, error)
}

// Pool is a Conns that dials each address once with its options and keeps the connection
// until Close. It holds one connection per address it was asked for: the destination service
// and the replicas that own the services the proxy uses, so its size is bounded by the
// replicas' count. Safe for concurrent use.
type Pool struct {
	opts   []grpc.DialOption
	mu     sync.Mutex
	conns  map[string]*grpc.ClientConn
	closed bool
}

var _ Conns = (*Pool)(nil)

// NewPool returns a pool dialling with opts (transport credentials among them), after a
// client keepalive (a ping every 30 s, a dead peer detected within 10 s more) that opts may
// override; the destination allows pings every 10 s.
func NewPool(opts ...grpc.DialOption) *Pool {
	base := []grpc.DialOption{grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 30 * time.Second, Timeout: 10 * time.Second})}
	return &Pool{opts: append(base, opts...), conns: map[string]*grpc.ClientConn{}}
}

var errPoolClosed = errors.New("discovery: connection pool closed")

// Conn returns the connection to addr, dialling it the first time.
func (p *Pool) Conn(addr string) (grpc.ClientConnInterface, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, errPoolClosed
	}
	if c, ok := p.conns[addr]; ok {
		return c, nil
	}
	c, err := grpc.NewClient(addr, p.opts...)
	if err != nil {
		return nil, err
	}
	p.conns[addr] = c
	return c, nil
}

// Close closes every connection; Conn fails after it. It is idempotent.
func (p *Pool) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	var errs []error
	for addr, c := range p.conns {
		errs = append(errs, c.Close())
		delete(p.conns, addr)
	}
	return errors.Join(errs...)
}
