package policy

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/linkerd/linkerd2-proxy-api/go/inbound"
	"github.com/meridian-mesh/meridian/internal/kube"
	"github.com/meridian-mesh/meridian/internal/manifest"
	"github.com/meridian-mesh/meridian/internal/run"
	"github.com/meridian-mesh/meridian/policy/compute"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"google.golang.org/grpc"
)

// Config configures the policy controller.
type Config struct {
	// Source is "kubernetes" (informers, using Kubeconfig or the in-cluster config) or
	// "dir:PATH" (a directory of manifests, watched).
	Source     string
	Kubeconfig string
	// Compute holds the cluster default policy, cluster and probe networks, detect timeout
	// and identity naming.
	Compute compute.Config
}

// DefaultConfig returns Linkerd's defaults: the Kubernetes source and compute.DefaultConfig.
func DefaultConfig() Config {
	return Config{
		Source:  "kubernetes",
		Compute: compute.DefaultConfig(),
	}
}

// Deps are what New needs besides its Config.
type Deps struct {
	// Source, when set, is used instead of the one cfg.Source names (tests).
	Source     Source
	Registerer prometheus.Registerer // nil: metrics not exported
	Logger     *zap.Logger           // nil: no logging
}

// Controller is the policy controller as a component: its source feeds an Index, and its
// gRPC service (Register) serves each pod port's policy from it. Run runs the source until
// ctx ends and then ends the open WatchPort streams.
type Controller struct {
	cfg     Config
	src     Source
	idx     *Index
	srv     *Server
	metrics *Metrics
	log     *zap.Logger
	stop    chan struct{}
}

// New builds the controller: the source cfg.Source names (or deps.Source), the Index and
// the gRPC service.
func New(cfg Config, deps Deps) (*Controller, error) {
	log := deps.Logger
	if log == nil {
		log = zap.NewNop()
	}
	c := &Controller{cfg: cfg, log: log, metrics: NewMetrics(deps.Registerer), stop: make(chan struct{})}
	c.src = deps.Source
	if c.src == nil {
		src, err := NewSource(cfg, deps.Registerer, log, c.metrics)
		if err != nil {
			return nil, err
		}
		c.src = src
	}
	c.idx = NewIndex(&c.cfg.Compute, log, c.metrics)
	c.srv = NewServer(c.idx, log, c.stop)
	return c, nil
}

// Register registers InboundServerPolicies on g.
func (c *Controller) Register(g grpc.ServiceRegistrar) {
	inbound.RegisterInboundServerPoliciesServer(g, c.srv)
}

// Index returns the controller's index.
func (c *Controller) Index() *Index { return c.idx }

// Ready reports nil once the source has delivered its initial state.
func (c *Controller) Ready() error {
	if !c.src.Synced() {
		return errors.New("policy source not synced yet")
	}
	return nil
}

// Warnings returns the source's warnings (a manifest that does not parse, an object whose
// last update was invalid), while the last good state is served.
func (c *Controller) Warnings() []string { return run.WarningsOf(c.src) }

// Run runs the source into the index until ctx ends or the source fails; then open
// WatchPort streams end (Unavailable), so proxies reconnect elsewhere.
func (c *Controller) Run(ctx context.Context) error {
	defer close(c.stop)
	c.log.Info("policy controller running", zap.String("source", c.cfg.Source),
		zap.Stringer("cluster_default_policy", c.cfg.Compute.DefaultPolicy))
	if err := c.src.Run(ctx, c.idx); err != nil {
		return fmt.Errorf("policy source: %w", err)
	}
	return nil
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
