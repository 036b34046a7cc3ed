package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/meridian-mesh/meridian/internal/admin"
	"github.com/meridian-mesh/meridian/internal/grpcserver"
	"github.com/meridian-mesh/meridian/internal/run"
)

// newRegistry returns a process's metrics registry with the Go and process collectors.
func newRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// server is the process of one server subcommand: its registry and logger, its components in
// one run.Group, an optional gRPC server, and the admin endpoints, whose /ready is the group's
// readiness and warnings. Every server subcommand runs through it, so they all start, report
// and stop the same way.
type server struct {
	log   *zap.Logger
	reg   *prometheus.Registry
	group run.Group

	grpcAddr, adminAddr string
	grpc                *grpc.Server // nil: no gRPC API
	grace               time.Duration
	adminRoutes         map[string]http.Handler
	pprof               bool

	lis, adminLis net.Listener
}

// newServer returns a server with a registry; call withGRPC for a gRPC API, add components
// to group, listen, then run.
func newServer(log *zap.Logger, adminAddr string) *server {
	return &server{log: log, reg: newRegistry(), adminAddr: adminAddr, grace: 5 * time.Second, pprof: true, adminRoutes: map[string]http.Handler{}}
}

// withGRPC gives the server a gRPC API on addr (with the grpc_server_* metrics); the caller
// registers its services on the returned server.
func (s *server) withGRPC(addr string) *grpc.Server {
	s.grpcAddr = addr
	s.grpc = grpcserver.New(s.reg)
	return s.grpc
}

// listen opens the gRPC and admin listeners (so that their addresses are known before the
// components start) or neither.
func (s *server) listen() error {
	if s.grpc != nil {
		lis, err := net.Listen("tcp", s.grpcAddr)
		if err != nil {
			return fmt.Errorf("listen %s: %w", s.grpcAddr, err)
		}
		s.lis = lis
	}
	adminLis, err := net.Listen("tcp", s.adminAddr)
	if err != nil {
		if s.lis != nil {
			_ = s.lis.Close()
		}
		return fmt.Errorf("listen %s: %w", s.adminAddr, err)
	}
	s.adminLis = adminLis
	return nil
}

// close closes the listeners; for the paths that return before run (closing a listener a
// server has already closed is harmless).
func (s *server) close() {
	if s.lis != nil {
		_ = s.lis.Close()
	}
	if s.adminLis != nil {
		_ = s.adminLis.Close()
	}
}

// run serves until ctx ends or a component fails: the components, the gRPC server and the
// admin endpoints in one group. listen must have succeeded.
func (s *server) run(ctx context.Context) error {
	if s.grpc != nil {
		s.group.Go("grpc", func(ctx context.Context) error { return grpcserver.Serve(ctx, s.grpc, s.lis, s.grace) })
	}
	mux := http.NewServeMux()
	mux.Handle("/", admin.NewHandler(s.reg, admin.Options{Ready: s.group.Ready, Warnings: s.group.Warnings, Pprof: s.pprof}))
	for path, h := range s.adminRoutes {
		mux.Handle(path, h)
	}
	s.group.Go("admin", func(ctx context.Context) error { return admin.Serve(ctx, s.adminLis, mux) })
	fields := []zap.Field{zap.String("admin", s.adminLis.Addr().String())}
	if s.lis != nil {
		fields = append(fields, zap.String("addr", s.lis.Addr().String()))
	}
	s.log.Info("serving", fields...)
	return s.group.Run(ctx)
}
