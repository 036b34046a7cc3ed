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
// release is called once, when the attempt's stream has ended: a connection nothing uses can
// then be closed.
type Conns interface {
	Conn(addr string) (cc grpc.ClientConnInterface, release func(), err error)
}

// PoolIdleTimeout is how long a Pool keeps a connection that no stream uses. Replicas'
// addresses change with every rollout (pod IPs), so a long-lived proxy is redirected to ever
// new owners: without it the pool would keep a connection to every replica it ever met.
const PoolIdleTimeout = 5 * time.Minute

// Pool is a Conns that dials each address once with its options and keeps the connection
// while streams use it, and for PoolIdleTimeout after the last ended: its size is bounded by
// the addresses used in that window (the destination service and the replicas that own the
// services the proxy uses). Idle connections are closed by the next Conn or release, so it
// needs no goroutine. Safe for concurrent use.
type Pool struct {
	opts   []grpc.DialOption
	idle   time.Duration
	now    func() time.Time
	mu     sync.Mutex
	conns  map[string]*pooled
	closed bool
}

// pooled is one connection of a Pool: its streams' count, and since when it has had none.
type pooled struct {
	cc        *grpc.ClientConn
	users     int
	idleSince time.Time
}

var _ Conns = (*Pool)(nil)

// NewPool returns a pool dialling with opts (transport credentials among them), after a
// client keepalive (a ping every 30 s, a dead peer detected within 10 s more) that opts may
// override; the destination allows pings every 10 s.
func NewPool(opts ...grpc.DialOption) *Pool {
	base := []grpc.DialOption{grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 30 * time.Second, Timeout: 10 * time.Second})}
	return &Pool{opts: append(base, opts...), idle: PoolIdleTimeout, now: time.Now, conns: map[string]*pooled{}}
}

var errPoolClosed = errors.New("discovery: connection pool closed")

// Conn returns the connection to addr, dialling it the first time, and counts a user of it
// until release.
func (p *Pool) Conn(addr string) (grpc.ClientConnInterface, func(), error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, nil, errPoolClosed
	}
	stale := p.sweepLocked()
	pc, ok := p.conns[addr]
	if !ok {
		cc, err := grpc.NewClient(addr, p.opts...)
		if err != nil {
			p.mu.Unlock()
			closeAll(stale)
			return nil, nil, err
		}
		pc = &pooled{cc: cc}
		p.conns[addr] = pc
	}
	pc.users++
	p.mu.Unlock()
	closeAll(stale)
	var once sync.Once
	return pc.cc, func() { once.Do(func() { p.release(pc) }) }, nil
}

func (p *Pool) release(pc *pooled) {
	p.mu.Lock()
	pc.users--
	if pc.users == 0 {
		pc.idleSince = p.now()
	}
	stale := p.sweepLocked()
	p.mu.Unlock()
	closeAll(stale)
}

// sweepLocked removes the connections idle for longer than p.idle and returns them, to be
// closed once p.mu is released.
func (p *Pool) sweepLocked() []*grpc.ClientConn {
	var stale []*grpc.ClientConn
	cutoff := p.now().Add(-p.idle)
	for addr, pc := range p.conns {
		if pc.users == 0 && pc.idleSince.Before(cutoff) {
			stale = append(stale, pc.cc)
			delete(p.conns, addr)
		}
	}
	return stale
}

func closeAll(ccs []*grpc.ClientConn) {
	for _, cc := range ccs {
		_ = cc.Close()
	}
}

// size is the number of connections the pool holds.
func (p *Pool) size() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns)
}

// Close closes every connection; Conn fails after it. It is idempotent.
func (p *Pool) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	var errs []error
	for addr, pc := range p.conns {
		errs = append(errs, pc.cc.Close())
		delete(p.conns, addr)
	}
	return errors.Join(errs...)
}
