package serve

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

// NewRegistry returns a process's metrics registry with the Go and process collectors.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// StopMargin is what a process whose components drain for a grace period adds to that
// period for its group's stop bound (Group.StopTimeout = grace + StopMargin).
const StopMargin = 5 * time.Second

// Process is one server command's process. Build it with New, give it a gRPC API with
// WithGRPC if it has one, add its components to Group, Listen, then Run.
type Process struct {
	Log      *zap.Logger
	Registry *prometheus.Registry
	// Group holds the components; Run adds the gRPC and admin servers to it.
	Group run.Group
	// Grace bounds the graceful stop of the gRPC server (streams open after it are cut).
	Grace time.Duration
	// AdminRoutes are served on the admin port beside /metrics, /live, /ready (e.g. /ring).
	AdminRoutes map[string]http.Handler
	// Pprof serves /debug/pprof/ on the admin port. It is off by default, as in Linkerd: a
	// profile shows the process's memory and command line to whoever reaches the port. The
	// server commands turn it on with --enable-pprof.
	Pprof bool

	grpcAddr, adminAddr string
	grpc                *grpc.Server // nil: no gRPC API
	lis, adminLis       net.Listener
}

// New returns a process whose admin endpoints will listen on adminAddr, without
// /debug/pprof/ (set Pprof to serve it). log may be nil.
func New(log *zap.Logger, adminAddr string) *Process {
	if log == nil {
		log = zap.NewNop()
	}
	return &Process{Log: log, Registry: NewRegistry(), adminAddr: adminAddr, Grace: 5 * time.Second, AdminRoutes: map[string]http.Handler{}}
}

// WithGRPC gives the process a gRPC API on addr (with the grpc_server_* metrics); the caller
// registers its services on the returned server.
func (p *Process) WithGRPC(addr string) *grpc.Server {
	p.grpcAddr = addr
	p.grpc = grpcserver.New(p.Registry)
	return p.grpc
}

// Listen opens the gRPC and admin listeners (so that their addresses are known before the
// components start), or neither.
func (p *Process) Listen() error {
	if p.grpc != nil {
		lis, err := net.Listen("tcp", p.grpcAddr)
		if err != nil {
			return fmt.Errorf("listen %s: %w", p.grpcAddr, err)
		}
		p.lis = lis
	}
	adminLis, err := net.Listen("tcp", p.adminAddr)
	if err != nil {
		if p.lis != nil {
			_ = p.lis.Close()
		}
		return fmt.Errorf("listen %s: %w", p.adminAddr, err)
	}
	p.adminLis = adminLis
	return nil
}

// Addr is the gRPC listener's address (nil before Listen or without gRPC).
func (p *Process) Addr() net.Addr {
	if p.lis == nil {
		return nil
	}
	return p.lis.Addr()
}

// AdminAddr is the admin listener's address (nil before Listen).
func (p *Process) AdminAddr() net.Addr {
	if p.adminLis == nil {
		return nil
	}
	return p.adminLis.Addr()
}

// Close closes the listeners, for the paths that return before Run (closing a listener a
// server has already closed is harmless).
func (p *Process) Close() {
	if p.lis != nil {
		_ = p.lis.Close()
	}
	if p.adminLis != nil {
		_ = p.adminLis.Close()
	}
}

// Run serves until ctx ends or a component fails: the components, the gRPC server and the
// admin endpoints in one group. Listen must have succeeded.
func (p *Process) Run(ctx context.Context) error {
	if p.grpc != nil {
		p.Group.Go("grpc", func(ctx context.Context) error { return grpcserver.Serve(ctx, p.grpc, p.lis, p.Grace) })
	}
	mux := http.NewServeMux()
	mux.Handle("/", admin.NewHandler(p.Registry, admin.Options{Ready: p.Group.Ready, Warnings: p.Group.Warnings, Pprof: p.Pprof}))
	for path, h := range p.AdminRoutes {
		mux.Handle(path, h)
	}
	p.Group.Go("admin", func(ctx context.Context) error { return admin.Serve(ctx, p.adminLis, mux) })
	fields := []zap.Field{zap.String("admin", p.adminLis.Addr().String())}
	if p.lis != nil {
		fields = append(fields, zap.String("addr", p.lis.Addr().String()))
	}
	p.Log.Info("serving", fields...)
	return p.Group.Run(ctx)
}
