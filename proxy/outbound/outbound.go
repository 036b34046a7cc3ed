package outbound

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/meridian-mesh/meridian/internal/tlsid"
	"github.com/meridian-mesh/meridian/proxy/h2"
	"github.com/meridian-mesh/meridian/proxy/internal/accept"
	"github.com/meridian-mesh/meridian/proxy/internal/handoff"
	"github.com/meridian-mesh/meridian/proxy/internal/rawio"
	"github.com/meridian-mesh/meridian/proxy/metrics"
	"github.com/meridian-mesh/meridian/proxy/origdst"
)

// Outbound is the outbound side of the proxy. Build it with New and run it with Run or Serve
// (once).
type Outbound struct {
	cfg      Config
	resolver Resolver
	tls      *tlsid.Config
	metrics  *metrics.Metrics
	log      *zap.Logger
	origDst  func(net.Conn) (netip.AddrPort, error)
	opaque   map[uint16]bool
	suffixes []string   // lowercased, without the trailing dot; "" matches every name
	dialer   net.Dialer // the kernel picks the source address
	local    net.Dialer // from Config.SourceAddr (see dialerFor)
	targets  *targets

	// ctx ends at the hard stop (the grace period is over): it is every request's and
	// resolution's base context.
	ctx    context.Context
	cancel context.CancelFunc

	started  atomic.Bool
	serving  atomic.Bool
	addr     atomic.Pointer[net.Addr]
	conns    connSet // accepted connections outside the HTTP server: detecting, tunnels
	requests tracker // the HTTP handlers running

	h2cfg   h2.Config      // the lean HTTP/2 relay's connections
	h2conns sync.WaitGroup // the read loops of its upstream connections
}

// New returns the outbound side. It listens on nothing until Run or Serve.
func New(cfg Config, deps Deps) (*Outbound, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if deps.Resolver == nil {
		return nil, errors.New("outbound: no resolver")
	}
	o := &Outbound{cfg: cfg, resolver: deps.Resolver, tls: deps.TLS, metrics: deps.Metrics, log: deps.Log,
		origDst: deps.OriginalDst, opaque: map[uint16]bool{}}
	if o.metrics == nil {
		o.metrics = metrics.New(nil)
	}
	if o.log == nil {
		o.log = zap.NewNop()
	}
	if o.origDst == nil {
		o.origDst = origdst.OriginalDst
	}
	for _, p := range cfg.OpaquePorts {
		o.opaque[p] = true
	}
	for _, s := range cfg.ClusterSuffixes {
		o.suffixes = append(o.suffixes, strings.TrimSuffix(strings.ToLower(s), "."))
	}
	o.dialer = net.Dialer{Timeout: cfg.ConnectTimeout, KeepAlive: 10 * time.Second}
	o.local = o.dialer
	if cfg.SourceAddr.IsValid() {
		o.local.LocalAddr = &net.TCPAddr{IP: cfg.SourceAddr.AsSlice()}
	}
	o.ctx, o.cancel = context.WithCancel(context.Background())
	o.targets = newTargets(o)
	o.h2cfg = h2.Config{MaxHeaderListSize: uint32(cfg.MaxHeaderBytes), WriteTimeout: 10 * time.Second}
	return o, nil
}

// dialerFor returns the dialer for a connection to addr: from Config.SourceAddr when it is
// set, except that a loopback source is used only for loopback destinations (the kernel
// refuses to connect from 127.x.y.z to another host, and a name, resolved while dialling,
// may be anywhere).
func (o *Outbound) dialerFor(addr string) *net.Dialer {
	src := o.cfg.SourceAddr
	if !src.IsValid() {
		return &o.dialer
	}
	if src.IsLoopback() {
		if ap, err := netip.ParseAddrPort(addr); err != nil || !ap.Addr().IsLoopback() {
			return &o.dialer
		}
	}
	return &o.local
}

// Addr returns the listener's address once Run or Serve has it (nil before).
func (o *Outbound) Addr() net.Addr {
	if a := o.addr.Load(); a != nil {
		return *a
	}
	return nil
}

// Ready reports whether the listener is accepting (a run.Readier).
func (o *Outbound) Ready() error {
	if !o.serving.Load() {
		return errors.New("outbound: not accepting connections")
	}
	return nil
}

// Run listens on Config.ListenAddr and serves until ctx ends; see Serve.
func (o *Outbound) Run(ctx context.Context) error {
	lis, err := net.Listen("tcp", o.cfg.ListenAddr)
	if err != nil {
		return fmt.Errorf("outbound: listen on %s: %w", o.cfg.ListenAddr, err)
	}
	return o.Serve(ctx, lis)
}

// Serve accepts connections on lis until ctx ends, then stops accepting, lets in-flight
// requests and tunnels finish for Config.Grace, closes the rest, and returns once every
// goroutine it started has ended. It closes lis. It returns nil after ctx ended, or the
// listener's error.
func (o *Outbound) Serve(ctx context.Context, lis net.Listener) error {
	if !o.started.CompareAndSwap(false, true) {
		_ = lis.Close()
		return errors.New("outbound: Serve called twice")
	}
	defer o.cancel()
	addr := lis.Addr()
	o.addr.Store(&addr)
	hl := handoff.New(addr)
	srv := o.httpServer()
	srvDone := make(chan struct{})
	go func() {
		defer close(srvDone)
		_ = srv.Serve(hl) // ErrServerClosed once Shutdown closes hl
	}()
	janitorCtx, stopJanitor := context.WithCancel(context.Background())
	janitorDone := make(chan struct{})
	go func() {
		defer close(janitorDone)
		o.targets.run(janitorCtx)
	}()
	var conns sync.WaitGroup
	acceptDone := make(chan error, 1)
	go func() { acceptDone <- o.accept(ctx, lis, hl, &conns) }()
	o.serving.Store(true)
	o.log.Info("outbound listening", zap.Stringer("addr", lis.Addr()))

	var err error
	select {
	case <-ctx.Done():
		o.serving.Store(false) // not ready from the moment the listener stops accepting
		_ = lis.Close()
		err = <-acceptDone
	case err = <-acceptDone:
		o.serving.Store(false)
		_ = lis.Close()
	}
	o.drain(srv)
	conns.Wait()
	<-srvDone
	o.requests.wait()
	o.targets.close() // retires every endpoint: their HTTP/2 connections close
	o.h2conns.Wait()
	stopJanitor()
	<-janitorDone
	return err
}

// drain lets the requests and tunnels in flight finish within Config.Grace, then closes
// everything that is left.
func (o *Outbound) drain(srv *http.Server) {
	o.log.Info("outbound draining", zap.Duration("grace", o.cfg.Grace))
	grace, cancel := context.WithTimeout(context.Background(), o.cfg.Grace)
	defer cancel()
	o.conns.closeIdle() // nothing of theirs is in flight
	shut := make(chan struct{})
	go func() {
		defer close(shut)
		_ = srv.Shutdown(grace) // closes the listener and idle connections, waits for the active
	}()
	o.conns.waitTunnels(grace)
	o.requests.waitIdle(grace)
	<-shut
	// The hard stop: the server's connections and the tunnels close (so that no handler
	// answers a request it could not finish), then request contexts and resolutions end.
	o.requests.close()
	_ = srv.Close()
	o.conns.closeAll()
	o.cancel()
}

// accept hands every accepted connection to its own goroutine (counted in conns) until lis
// fails; it returns nil when lis was closed.
func (o *Outbound) accept(ctx context.Context, lis net.Listener, hl *handoff.Listener, conns *sync.WaitGroup) error {
	onRetry := func(err error, backoff time.Duration) {
		o.log.Warn("outbound accept", zap.Error(err), zap.Duration("retry_in", backoff))
	}
	err := accept.Loop(ctx, lis, passes, onRetry, func(c net.Conn) {
		c = rawio.Wrap(c)
		conns.Add(1)
		go func() {
			defer conns.Done()
			o.serveConn(c, hl)
		}()
	})
	if err != nil {
		return fmt.Errorf("outbound: accept: %w", err)
	}
	return nil
}

// passes reports the accept errors that pass (timeouts, too many open files, aborted
// connections), as net/http's server treats them.
func passes(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	var t interface{ Temporary() bool }
	return errors.As(err, &t) && t.Temporary()
}
