package grpcserver

import (
	"context"
	"net"
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

// Serve serves srv on lis until ctx ends, then stops it gracefully; streams still open after
// grace are cut. It returns the serve error, or nil after a stop caused by ctx.
func Serve(ctx context.Context, srv *grpc.Server, lis net.Listener, grace time.Duration) error {
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(lis) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	stopped := make(chan struct{})
	go func() { srv.GracefulStop(); close(stopped) }()
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-stopped:
	case <-t.C:
		srv.Stop()
		<-stopped
	}
	<-errc
	return nil
}
