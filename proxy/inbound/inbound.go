package inbound

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/meridian-mesh/meridian/internal/run"
	"github.com/meridian-mesh/meridian/proxy/h1"
	"github.com/meridian-mesh/meridian/proxy/h2"
	"github.com/meridian-mesh/meridian/proxy/inbound/policy"
	"github.com/meridian-mesh/meridian/proxy/internal/accept"
	"github.com/meridian-mesh/meridian/proxy/internal/handoff"
	"github.com/meridian-mesh/meridian/proxy/internal/rawio"
	"github.com/meridian-mesh/meridian/proxy/metrics"
	"go.uber.org/zap"
)

// Inbound is the inbound proxy. Build it with New and run it with Run (a run.Component that
// is a run.Readier and a run.Warner).
type Inbound struct {
	cfg     Config
	origDst func(net.Conn) (netip.AddrPort, error)
	tls     *tls.Config // nil: no termination
	watcher *policy.Watcher
	metrics *metrics.Metrics
	log     *zap.Logger
	opaque  map[uint16]bool
	dialer  net.Dialer

	h1, h2  *http.Transport // to the application: HTTP/1.1 keep-alive, h2c
	httpSrv *http.Server
	httpLis *handoff.Listener
	pools   pools[h1.Pool] // the lean HTTP/1.1 path's connections to the application
	lean    leanConns      // the lean path's client connections between requests
	epoch   time.Time      // the pools' clock starts here

	h2cfg    h2.Config      // the lean HTTP/2 relay's connections
	h2pools  pools[h2.Pool] // its connections to the application
	h2served h2served       // its client connections
	h2wg     sync.WaitGroup // its upstream read loops, dials and net/http fallbacks

	mu     sync.Mutex
	lis    net.Listener
	closed bool // Run ended: Listen refuses

	conns registry
	wg    sync.WaitGroup // connection goroutines
}

// New builds the inbound proxy; it checks cfg and opens nothing.
func New(cfg Config, deps Deps) (*Inbound, error) {
	cfg.fill()
	fallback, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	log := deps.Logger
	if log == nil {
		log = zap.NewNop()
	}
	m := deps.Metrics
	if m == nil {
		m = metrics.New(nil)
	}
	i := &Inbound{
		cfg:     cfg,
		tls:     serverTLS(deps.TLS),
		origDst: deps.OriginalDst,
		watcher: policy.NewWatcher(cfg.Policy, deps.PolicyConn, fallback, log.Named("policy")),
		metrics: m,
		log:     log,
		opaque:  map[uint16]bool{},
		dialer:  net.Dialer{Timeout: cfg.ConnectTimeout, KeepAlive: 30 * time.Second},
		epoch:   time.Now(),
		h2cfg:   h2.Config{WriteTimeout: 10 * time.Second},
	}
	for _, p := range cfg.OpaquePorts {
		i.opaque[p] = true
	}
	i.conns.conns = map[*trackedConn]struct{}{}
	i.h1, i.h2 = i.transports()
	i.httpSrv = i.newHTTPServer()
	return i, nil
}

// Listen binds the listener, if Run has not yet; Run calls it. It lets a caller learn Addr
// before Run.
func (i *Inbound) Listen() error {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.lis != nil {
		return nil
	}
	if i.closed {
		return errors.New("inbound: stopped")
	}
	lis, err := net.Listen("tcp", i.cfg.ListenAddr)
	if err != nil {
		return fmt.Errorf("inbound: listen on %s: %w", i.cfg.ListenAddr, err)
	}
	i.lis = lis
	i.httpLis = handoff.New(lis.Addr())
	return nil
}

// Addr is the listener's address, nil before Listen.
func (i *Inbound) Addr() net.Addr {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.lis == nil {
		return nil
	}
	return i.lis.Addr()
}

// Ready reports nil once the listener is bound.
func (i *Inbound) Ready() error {
	if i.Addr() == nil {
		return errors.New("inbound listener not bound yet")
	}
	return nil
}

// Warnings are the policy problems (a port on a stale or default policy).
func (i *Inbound) Warnings() []string { return i.watcher.Warnings() }

// Run accepts connections until ctx ends, then drains: it stops accepting, lets open
// requests and connections finish for Config.Grace, closes the rest, and returns once every
// connection and policy stream has stopped.
func (i *Inbound) Run(ctx context.Context) error {
	if err := i.Listen(); err != nil {
		return err
	}
	i.mu.Lock()
	lis, httpLis := i.lis, i.httpLis
	i.mu.Unlock()

	wctx, stopWatch := context.WithCancel(context.WithoutCancel(ctx))
	watchDone := make(chan struct{})
	go func() { defer close(watchDone); _ = i.watcher.Run(wctx) }()
	httpDone := make(chan struct{})
	go func() { defer close(httpDone); _ = i.httpSrv.Serve(httpLis) }()
	acceptDone := make(chan struct{})
	go func() { defer close(acceptDone); i.accept(ctx, lis) }()
	sweepDone := make(chan struct{})
	go func() { defer close(sweepDone); i.sweep(wctx) }()

	select {
	case <-ctx.Done():
	case <-acceptDone: // the listener was closed under us
	}
	_ = lis.Close()
	<-acceptDone
	i.mu.Lock()
	i.closed = true
	i.mu.Unlock()
	i.drain()
	<-httpDone
	i.wg.Wait()
	stopWatch()
	<-watchDone
	<-sweepDone
	i.h1.CloseIdleConnections()
	i.h2.CloseIdleConnections()
	i.pools.each(func(p *h1.Pool) { p.CloseIdle(true) })
	i.h2pools.each(func(p *h2.Pool) { p.Close() })
	i.h2wg.Wait()
	return nil
}

// now is the lean path's pool clock: nanoseconds since New.
func (i *Inbound) now() int64 { return int64(time.Since(i.epoch)) }

// sweep closes the lean path's connections to the application that stayed idle for
// poolIdleTimeout, and tells the HTTP/2 clients without a stream for Config.IdleTimeout to go
// away, every quarter of the shorter of the two, until ctx ends.
func (i *Inbound) sweep(ctx context.Context) {
	run.Every(ctx, min(poolIdleTimeout, i.cfg.IdleTimeout)/4, func() {
		now := i.now()
		i.pools.each(func(p *h1.Pool) { p.Sweep(now, int64(poolIdleTimeout)) })
		before := time.Now().Add(-poolIdleTimeout)
		i.h2pools.each(func(p *h2.Pool) { p.CloseIdle(before, false) })
		i.h2served.closeIdle(time.Now().Add(-i.cfg.IdleTimeout))
	})
}

// drain lets open connections finish for the grace period, then closes them.
func (i *Inbound) drain() {
	grace, cancel := context.WithTimeout(context.Background(), i.cfg.Grace)
	defer cancel()
	shut := make(chan struct{})
	go func() { defer close(shut); _ = i.httpSrv.Shutdown(grace) }()
	i.lean.drain()
	i.h2served.drain()
	if !i.conns.wait(grace) {
		i.log.Info("inbound: grace period over: closing connections", zap.Int("open", i.conns.len()))
	}
	<-shut
	_ = i.httpSrv.Close()
	i.conns.closeAll()
	i.conns.wait(context.Background())
}

// accept runs the accept loop until the listener closes. Other accept errors (out of file
// descriptors, an aborted connection) are retried with a backoff of up to a second.
func (i *Inbound) accept(ctx context.Context, lis net.Listener) {
	retry := func(error) bool { return ctx.Err() == nil }
	onRetry := func(err error, backoff time.Duration) {
		i.log.Warn("inbound: accept failed: retrying", zap.Error(err), zap.Duration("backoff", backoff))
	}
	_ = accept.Loop(ctx, lis, retry, onRetry, func(c net.Conn) {
		if i.conns.len() >= i.cfg.MaxConns {
			i.log.Debug("inbound: too many connections: closing", zap.Int("max", i.cfg.MaxConns))
			_ = c.Close()
			return
		}
		tc := i.conns.add(rawio.Wrap(c))
		i.wg.Add(1)
		go func() {
			defer i.wg.Done()
			i.serveConn(ctx, tc)
		}()
	})
}

// registry tracks open connections, so that the drain can wait for them and close them.
type registry struct {
	mu    sync.Mutex
	conns map[*trackedConn]struct{}
	n     atomic.Int64
	empty chan struct{} // closed when n drops to 0; nil when n is 0
}

// trackedConn is an accepted connection in the registry; closing it removes it and runs its
// release hook (the policy port it holds).
type trackedConn struct {
	net.Conn
	r *registry

	mu      sync.Mutex
	closed  bool
	release func()
	up      net.Conn // the lean path's connection to the application while a request uses it
}

func (r *registry) add(c net.Conn) *trackedConn {
	tc := &trackedConn{Conn: c, r: r}
	r.mu.Lock()
	r.conns[tc] = struct{}{}
	if r.n.Add(1) == 1 {
		r.empty = make(chan struct{})
	}
	r.mu.Unlock()
	return tc
}

func (r *registry) len() int { return int(r.n.Load()) }

// wait waits until every connection closed or ctx ended; it reports the former.
func (r *registry) wait(ctx context.Context) bool {
	r.mu.Lock()
	empty := r.empty
	r.mu.Unlock()
	if empty == nil {
		return true
	}
	select {
	case <-empty:
		return true
	case <-ctx.Done():
		return false
	}
}

func (r *registry) closeAll() {
	r.mu.Lock()
	conns := slices.Collect(maps.Keys(r.conns))
	r.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
}

// onClose sets the function Close runs (once); on a closed connection it runs f now.
func (c *trackedConn) onClose(f func()) {
	c.mu.Lock()
	if !c.closed {
		c.release = f
		f = nil
	}
	c.mu.Unlock()
	if f != nil {
		f()
	}
}

// Close closes the socket once, runs the onClose function and leaves the registry.
func (c *trackedConn) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return net.ErrClosed
	}
	c.closed = true
	release, up := c.release, c.up
	c.mu.Unlock()
	err := c.Conn.Close()
	if up != nil {
		_ = up.Close()
	}
	if release != nil {
		release()
	}
	r := c.r
	r.mu.Lock()
	delete(r.conns, c)
	if r.n.Add(-1) == 0 {
		close(r.empty)
		r.empty = nil
	}
	r.mu.Unlock()
	return err
}

// setUpstream records the lean path's connection to the application while a request uses
// it (nil when done), so that closing c closes it too; false (and up is closed) once c is
// closed.
func (c *trackedConn) setUpstream(up net.Conn) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		if up != nil {
			_ = up.Close()
		}
		return false
	}
	c.up = up
	return true
}

// closeUpstream closes the connection to the application a request uses now, if any (its
// client left: h1.Watch).
func (c *trackedConn) closeUpstream() {
	c.mu.Lock()
	up := c.up
	c.mu.Unlock()
	if up != nil {
		_ = up.Close()
	}
}

// NetConn returns the socket (origdst reads the original destination from it).
func (c *trackedConn) NetConn() net.Conn { return c.Conn }

// CloseWrite half-closes the socket.
func (c *trackedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errors.ErrUnsupported
}

// dial connects to the application (through rawio, as the accepted connections are read).
func (i *Inbound) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	return rawio.Dial(ctx, &i.dialer, network, addr)
}
