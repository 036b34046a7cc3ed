package grpcserver

import (
	"context"
	"errors"
	"net"
	"sync"
	"syscall"
	"time"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
)

// New returns a gRPC server whose calls are counted in grpc_server_* metrics registered on
// reg (handled_total, started_total, msg_received_total, msg_sent_total). Extra options are
// appended after Meridian's defaults.
func New(reg prometheus.Registerer, opts ...grpc.ServerOption) *grpc.Server {
	metrics := grpcprom.NewServerMetrics()
	if reg != nil {
		// A registry that already holds them (two servers in one test process on the
		// default registry) is not an error worth failing a server for.
		_ = reg.Register(metrics)
	}
	base := []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(metrics.UnaryServerInterceptor()),
		grpc.ChainStreamInterceptor(metrics.StreamServerInterceptor()),
		// Proxies keep streams open for hours; let them ping, and detect dead peers.
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 30 * time.Second, Timeout: 10 * time.Second}),
	}
	return grpc.NewServer(append(base, opts...)...)
}

// Serve serves srv on lis, and on each of more, until ctx ends or one of them fails; then it
// stops srv gracefully, and streams still open after grace are cut. It returns the first
// serve error, or nil after a stop caused by ctx.
//
// The forced stop closes every connection the listeners accepted first: grpc's Stop, like
// its GracefulStop, waits for the connections still in their handshake (TLS, the HTTP/2
// preface), up to its 120 s connection timeout, so one client that connects and sends
// nothing would hold the stop far past grace.
func Serve(ctx context.Context, srv *grpc.Server, lis net.Listener, grace time.Duration, more ...net.Listener) error {
	var conns accepted
	all := append([]net.Listener{lis}, more...)
	errc := make(chan error, len(all))
	for _, l := range all {
		go func() { errc <- srv.Serve(conns.track(l)) }()
	}
	var err error
	pending := len(all)
	select {
	case err = <-errc:
		pending--
	case <-ctx.Done():
	}
	stopped := make(chan struct{})
	go func() { srv.GracefulStop(); close(stopped) }()
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-stopped:
	case <-t.C:
		conns.closeAll()
		srv.Stop()
		<-stopped
	}
	for ; pending > 0; pending-- {
		if e := <-errc; err == nil && e != nil && !errors.Is(e, grpc.ErrServerStopped) {
			err = e
		}
	}
	return err
}

// accepted tracks the connections its listeners accept, without wrapping them (grpc sets
// TCP_USER_TIMEOUT on a *net.TCPConn only), so that closeAll can close them. Closed ones are
// pruned as new ones come, so it holds about twice the open ones at most.
type accepted struct {
	mu     sync.Mutex
	conns  []net.Conn
	prune  int // prune when conns reaches this many
	closed bool
}

func (a *accepted) track(l net.Listener) net.Listener { return &trackedListener{l, a} }

func (a *accepted) add(c net.Conn) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		_ = c.Close()
		return
	}
	if len(a.conns) >= a.prune {
		open := a.conns[:0]
		for _, c := range a.conns {
			if isOpen(c) {
				open = append(open, c)
			}
		}
		clear(a.conns[len(open):])
		a.conns = open
		a.prune = max(64, 2*len(open))
	}
	a.conns = append(a.conns, c)
}

func (a *accepted) closeAll() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.closed = true
	for _, c := range a.conns {
		_ = c.Close()
	}
	a.conns = nil
}

// isOpen reports whether c has not been closed: a closed connection's file descriptor can no
// longer be reached. A connection that wraps another (NetConn, as tls.Conn has) is asked
// through it; one that exposes neither counts as open.
func isOpen(c net.Conn) bool {
	for {
		w, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			break
		}
		c = w.NetConn()
	}
	sc, ok := c.(syscall.Conn)
	if !ok {
		return true
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	return rc.Control(func(uintptr) {}) == nil
}

type trackedListener struct {
	net.Listener
	a *accepted
}

func (l *trackedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.a.add(c)
	}
	return c, err
}
