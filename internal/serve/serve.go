package serve

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"regexp"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/meridian-mesh/meridian/internal/admin"
	"github.com/meridian-mesh/meridian/internal/grpcserver"
	"github.com/meridian-mesh/meridian/internal/run"
)

// NewRegistry returns a process's metrics registry with the Go and process collectors. The
// Go collector adds to its default set go_gc_heap_live_bytes (runtime/metrics
// /gc/heap/live:bytes): the heap the last collection found live, which is what a process
// needs, where go_memstats_heap_alloc_bytes also counts what was allocated since (the bench
// harness's heap figures read it after forcing a collection); and go_sched_latencies_seconds
// (/sched/latencies:seconds), how long goroutines waited runnable before they ran: a
// replica starved of CPU (a throttled pod, an overloaded node) shows it there before its
// gossip probes go unanswered and its peers suspect it.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(collectors.GoRuntimeMetricsRule{Matcher: heapLive})),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return reg
}

var heapLive = regexp.MustCompile(`^/gc/heap/live:bytes$|^/sched/latencies:seconds$`)

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
	// Grace bounds the graceful stop of the gRPC server (streams open after it are cut). Run
	// sets Group.StopTimeout, when unset, to Grace + StopMargin.
	Grace time.Duration
	// AdminRoutes are served on the admin port beside /metrics, /live, /ready (e.g. /ring).
	AdminRoutes map[string]http.Handler
	// Pprof serves /debug/pprof/ on the admin port. It is off by default, as in Linkerd: a
	// profile shows the process's memory and command line to whoever reaches the port. The
	// server commands turn it on with --enable-pprof.
	Pprof bool

	grpcAddr, adminAddr string
	localAddr           string       // "": no local plaintext listener
	grpc                *grpc.Server // nil: no gRPC API
	lis, adminLis       net.Listener
	localLis            net.Listener
}

// New returns a process whose admin endpoints will listen on adminAddr, without
// /debug/pprof/ (set Pprof to serve it). log may be nil.
func New(log *zap.Logger, adminAddr string) *Process {
	if log == nil {
		log = zap.NewNop()
	}
	return &Process{Log: log, Registry: NewRegistry(), adminAddr: adminAddr, Grace: 5 * time.Second, AdminRoutes: map[string]http.Handler{}}
}

// WithGRPC gives the process a gRPC API on addr in plaintext (with the grpc_server_*
// metrics); the caller registers its services on the returned server. The server commands
// use WithGRPCConfig, which serves the control plane's mTLS.
func (p *Process) WithGRPC(addr string) *grpc.Server {
	srv, _ := p.WithGRPCConfig(GRPC{Addr: addr}) // no LocalAddr: nothing to refuse
	return srv
}

// WithGRPCConfig gives the process a gRPC API as g says (with the grpc_server_* metrics): on
// g.Addr with g.Creds and, with g.LocalAddr, in plaintext on that loopback address too. The
// caller registers its services on the returned server, which serves both listeners. It
// refuses a LocalAddr that is not a loopback address.
func (p *Process) WithGRPCConfig(g GRPC) (*grpc.Server, error) {
	if g.LocalAddr != "" {
		if err := CheckLocalAddr(g.LocalAddr); err != nil {
			return nil, err
		}
	}
	creds := g.Creds
	if creds == nil {
		creds = insecure.NewCredentials()
	}
	p.grpcAddr, p.localAddr = g.Addr, g.LocalAddr
	p.grpc = grpcserver.New(p.Registry, append([]grpc.ServerOption{grpc.Creds(localAware{creds})}, g.Options...)...)
	return p.grpc, nil
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
	if p.grpc != nil && p.localAddr != "" {
		lis, err := net.Listen("tcp", p.localAddr)
		if err != nil {
			p.Close()
			return fmt.Errorf("listen %s (the local plaintext listener): %w", p.localAddr, err)
		}
		p.localLis = localListener{lis}
	}
	adminLis, err := net.Listen("tcp", p.adminAddr)
	if err != nil {
		p.Close()
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

// LocalAddr is the local plaintext listener's address (nil before Listen or without one).
func (p *Process) LocalAddr() net.Addr {
	if p.localLis == nil {
		return nil
	}
	return p.localLis.Addr()
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
	for _, l := range []net.Listener{p.lis, p.localLis, p.adminLis} {
		if l != nil {
			_ = l.Close()
		}
	}
}

// Run serves until ctx ends or a component fails: the components, the gRPC server and the
// admin endpoints in one group. Listen must have succeeded.
func (p *Process) Run(ctx context.Context) error {
	if p.grpc != nil {
		// The local listener, when there is one, is the same server's: one stop, or one
		// listener failing, stops both.
		var more []net.Listener
		if p.localLis != nil {
			more = append(more, p.localLis)
		}
		p.Group.Go("grpc", func(ctx context.Context) error { return grpcserver.Serve(ctx, p.grpc, p.lis, p.Grace, more...) })
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
	if p.localLis != nil {
		fields = append(fields, zap.String("localPlaintext", p.localLis.Addr().String()))
	}
	p.Log.Info("serving", fields...)
	if p.grpc != nil && p.Group.StopTimeout == 0 {
		// The gRPC server drains for Grace: the group waits that long and a margin, not
		// run.DefaultStopTimeout, which a grace above it would outlast.
		p.Group.StopTimeout = p.Grace + StopMargin
	}
	return p.Group.Run(ctx)
}
