package policy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/linkerd/linkerd2-proxy-api/go/inbound"
	"github.com/meridian-mesh/meridian/internal/admin"
	"github.com/meridian-mesh/meridian/internal/grpcserver"
	"github.com/meridian-mesh/meridian/internal/kube"
	"github.com/meridian-mesh/meridian/internal/manifest"
	"github.com/meridian-mesh/meridian/policy/compute"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"
)

// Config configures the policy controller.
type Config struct {
	// GRPCAddr serves InboundServerPolicies; AdminAddr serves /metrics, /live, /ready, pprof.
	GRPCAddr, AdminAddr string
	// Source is "kubernetes" (informers, using Kubeconfig or the in-cluster config) or
	// "dir:PATH" (a directory of manifests, watched).
	Source     string
	Kubeconfig string
	// Compute holds the cluster default policy, cluster and probe networks, detect timeout
	// and identity naming.
	Compute compute.Config
	// ShutdownGrace bounds how long in-flight calls may take once the controller stops.
	ShutdownGrace time.Duration
}

// DefaultConfig returns Linkerd's defaults: gRPC on :8090, admin on :9997, the Kubernetes
// source, and compute.DefaultConfig.
func DefaultConfig() Config {
	return Config{
		GRPCAddr:      ":8090",
		AdminAddr:     ":9997",
		Source:        "kubernetes",
		Compute:       compute.DefaultConfig(),
		ShutdownGrace: 5 * time.Second,
	}
}

// NewSource builds the source named by cfg.Source.
func NewSource(cfg Config, reg prometheus.Registerer, log *zap.Logger, metrics *Metrics) (Source, error) {
	switch {
	case cfg.Source == "kubernetes":
		kc, err := kube.NewClients(cfg.Kubeconfig)
		if err != nil {
			return nil, err
		}
		return NewKubeSource(kc.Typed, kc.Dynamic, reg, log, metrics), nil
	case strings.HasPrefix(cfg.Source, "dir:") && len(cfg.Source) > len("dir:"):
		return NewDirSource(manifest.DefaultConfig(strings.TrimPrefix(cfg.Source, "dir:")), reg, log, metrics), nil
	}
	return nil, fmt.Errorf("source %q: want kubernetes or dir:PATH", cfg.Source)
}

// Run listens on cfg's addresses and serves until ctx ends.
func Run(ctx context.Context, cfg Config, reg *prometheus.Registry, log *zap.Logger) error {
	metrics := NewMetrics(reg)
	src, err := NewSource(cfg, reg, log, metrics)
	if err != nil {
		return err
	}
	grpcLis, err := net.Listen("tcp", cfg.GRPCAddr)
	if err != nil {
		return fmt.Errorf("grpc listen: %w", err)
	}
	adminLis, err := net.Listen("tcp", cfg.AdminAddr)
	if err != nil {
		grpcLis.Close()
		return fmt.Errorf("admin listen: %w", err)
	}
	return Serve(ctx, cfg, src, metrics, grpcLis, adminLis, reg, log)
}

// Serve runs src into a new Index and serves the gRPC API on grpcLis and the admin server on
// adminLis until ctx ends or the source fails. /ready reports ready once src is synced, and
// lists src's warnings when it has any (a DirSource's manifest errors). It closes the
// listeners.
func Serve(ctx context.Context, cfg Config, src Source, metrics *Metrics, grpcLis, adminLis net.Listener, reg *prometheus.Registry, log *zap.Logger) error {
	ccfg := cfg.Compute
	idx := NewIndex(&ccfg, log, metrics)
	g, ctx := errgroup.WithContext(ctx)
	srv := grpcserver.New(reg)
	inbound.RegisterInboundServerPoliciesServer(srv, NewServer(idx, log, ctx.Done()))
	ready := func() error {
		if !src.Synced() {
			return errors.New("policy source not synced yet")
		}
		return nil
	}
	g.Go(func() error {
		if err := src.Run(ctx, idx); err != nil {
			return fmt.Errorf("policy source: %w", err)
		}
		return nil
	})
	g.Go(func() error { return grpcserver.Serve(ctx, srv, grpcLis, cfg.ShutdownGrace) })
	opts := admin.Options{Ready: ready, Pprof: true}
	if w, ok := src.(interface{ Warnings() []string }); ok {
		opts.Warnings = w.Warnings // a manifest that does not parse, while its last good state is served
	}
	g.Go(func() error { return admin.Serve(ctx, adminLis, admin.NewHandler(reg, opts)) })
	log.Info("policy controller serving", zap.String("grpc", grpcLis.Addr().String()),
		zap.String("admin", adminLis.Addr().String()), zap.String("source", cfg.Source),
		zap.Stringer("cluster_default_policy", cfg.Compute.DefaultPolicy))
	return g.Wait()
}
