package main

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.uber.org/zap"
	"k8s.io/client-go/kubernetes"

	"github.com/meridian-mesh/meridian/internal/admin"
	"github.com/meridian-mesh/meridian/internal/grpcserver"
	"github.com/meridian-mesh/meridian/internal/logging"
	"github.com/meridian-mesh/meridian/shard"
	"github.com/meridian-mesh/meridian/shard/source"
)

func init() {
	register(&command{name: "destination", summary: "run a destination replica (Linkerd's Destination API)", run: runDestination})
}

// destinationFlags are the flags of `meridian destination`.
type destinationFlags struct {
	addr, adminAddr, src, kubeconfig, logLevel, logFormat string
	cfg                                                   shard.Config
}

func (f *destinationFlags) parse(name string, args []string) error {
	f.cfg = shard.DefaultConfig()
	fs := newFlagSet(name)
	fs.StringVar(&f.addr, "addr", ":8086", "gRPC address of the Destination API")
	fs.StringVar(&f.adminAddr, "admin-addr", ":9996", "admin address (/metrics, /live, /ready, /debug/pprof/)")
	fs.StringVar(&f.src, "source", "kubernetes", "discovery source: kubernetes, or dir:PATH for a directory of Kubernetes YAML")
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, then in-cluster)")
	fs.StringVar(&f.cfg.Translator.ClusterDomain, "cluster-domain", f.cfg.Translator.ClusterDomain, "cluster DNS domain")
	fs.StringVar(&f.cfg.Translator.ControlPlaneNamespace, "control-plane-namespace", f.cfg.Translator.ControlPlaneNamespace, "control plane namespace")
	fs.StringVar(&f.cfg.Translator.TrustDomain, "trust-domain", f.cfg.Translator.TrustDomain, "identity trust domain")
	fs.IntVar(&f.cfg.QueueCapacity, "stream-queue-capacity", f.cfg.QueueCapacity, "bound of each stream's delta queue; a full queue coalesces")
	fs.IntVar(&f.cfg.Workers, "workers", f.cfg.Workers, "goroutines recomputing changed services")
	fs.StringVar(&f.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	fs.StringVar(&f.logFormat, "log-format", "json", "log format: json or console")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if f.cfg.QueueCapacity < 1 {
		return fmt.Errorf("--stream-queue-capacity must be at least 1, got %d", f.cfg.QueueCapacity)
	}
	return nil
}

// newSource builds the discovery source named by spec.
func newSource(spec, kubeconfig string, reg prometheus.Registerer, log *zap.Logger) (source.Source, error) {
	switch {
	case spec == "kubernetes":
		rc, err := source.RESTConfig(kubeconfig)
		if err != nil {
			return nil, err
		}
		cs, err := kubernetes.NewForConfig(rc)
		if err != nil {
			return nil, fmt.Errorf("kubernetes client: %w", err)
		}
		return source.NewKubernetes(cs, source.DefaultKubernetesConfig(), reg, log), nil
	case strings.HasPrefix(spec, "dir:"):
		path := strings.TrimPrefix(spec, "dir:")
		if path == "" {
			return nil, fmt.Errorf("--source dir: needs a path, as in dir:deploy/examples")
		}
		return source.NewDir(path, log), nil
	default:
		return nil, fmt.Errorf("--source %q: want kubernetes or dir:PATH", spec)
	}
}

func newRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

func runDestination(ctx context.Context, args []string) error {
	var f destinationFlags
	if err := f.parse("destination", args); err != nil {
		return err
	}
	log, err := logging.New(f.logLevel, f.logFormat)
	if err != nil {
		return err
	}
	defer func() { _ = log.Sync() }()
	reg := newRegistry()
	src, err := newSource(f.src, f.kubeconfig, reg, log)
	if err != nil {
		return err
	}
	replica := shard.NewReplica(f.cfg, src, reg, log)
	gs := grpcserver.New(reg)
	replica.Register(gs)
	lis, err := net.Listen("tcp", f.addr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", f.addr, err)
	}
	adminLis, err := net.Listen("tcp", f.adminAddr)
	if err != nil {
		lis.Close()
		return fmt.Errorf("listen %s: %w", f.adminAddr, err)
	}
	log.Info("destination replica starting", zap.String("addr", lis.Addr().String()), zap.String("admin", adminLis.Addr().String()), zap.String("source", f.src))
	return runAll(ctx,
		replica.Run,
		func(ctx context.Context) error { return grpcserver.Serve(ctx, gs, lis, 5*time.Second) },
		func(ctx context.Context) error {
			return admin.Serve(ctx, adminLis, admin.Handler(reg, replica.Ready))
		},
	)
}

// runAll runs each function until ctx ends or one of them fails, then cancels the rest and
// waits for all of them. It returns the first error.
func runAll(ctx context.Context, fns ...func(context.Context) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	for _, fn := range fns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := fn(ctx); err != nil {
				once.Do(func() { first = err })
				cancel()
			}
		}()
	}
	wg.Wait()
	return first
}
