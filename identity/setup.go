package identity

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
)

// Deps are what New needs besides its Config.
type Deps struct {
	// Kube is the API client; required when Config.NeedsKubernetes says so.
	Kube       kubernetes.Interface
	Logger     *zap.Logger           // nil: no logging
	Registerer prometheus.Registerer // nil: metrics are kept but not exported
}

// New builds the identity service that cfg describes: the issuer source (files or the
// Kubernetes Secret and ConfigMap), the token reviewer (TokenReview, checked for access, or
// the local-mesh key), and the event sink; then it loads the issuer. It refuses (an error
// saying why) when any of them is unusable, so that a CA with a bad issuer never starts.
func New(ctx context.Context, cfg Config, deps Deps) (*Service, error) {
	if cfg.Tokens == "" {
		cfg.Tokens = TokensKubernetes
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("identity config: %w", err)
	}
	if need, what := cfg.NeedsKubernetes(); need && deps.Kube == nil {
		return nil, fmt.Errorf("identity needs a Kubernetes client for %s", what)
	}
	var source IssuerSource
	if cfg.IssuerDir != "" {
		source = &FileSource{IssuerDir: cfg.IssuerDir, AnchorsFile: cfg.AnchorsFile, Log: deps.Logger}
	} else {
		source = &KubeSource{Client: deps.Kube, Namespace: cfg.ControlPlaneNamespace}
	}
	reviewer, err := newReviewer(ctx, cfg, deps.Kube)
	if err != nil {
		return nil, err
	}
	opts := Options{Logger: deps.Logger, Registerer: deps.Registerer}
	if deps.Kube != nil && cfg.EventDeployment != "" {
		opts.Events = &KubeEvents{Client: deps.Kube, Object: corev1.ObjectReference{
			APIVersion: "apps/v1", Kind: "Deployment", Namespace: cfg.ControlPlaneNamespace, Name: cfg.EventDeployment,
		}}
	}
	svc, err := NewService(cfg, source, reviewer, opts)
	if err != nil {
		return nil, err
	}
	if err := svc.Load(ctx); err != nil {
		return nil, fmt.Errorf("refusing to start: %w", err)
	}
	return svc, nil
}

func newReviewer(ctx context.Context, cfg Config, kube kubernetes.Interface) (TokenReviewer, error) {
	switch cfg.Tokens {
	case TokensLocal:
		pemData, err := os.ReadFile(cfg.LocalTokenKey)
		if err != nil {
			return nil, fmt.Errorf("read local token key: %w", err)
		}
		k, err := ParseLocalTokenKey(pemData)
		if err != nil {
			return nil, err
		}
		return NewLocalReviewer(&k.PublicKey), nil
	case TokensKubernetes:
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if err := CheckTokenReviewAccess(cctx, kube); err != nil {
			return nil, err
		}
		return NewKubeReviewer(kube), nil
	}
	return nil, errors.New("unreachable: Validate accepts no other token reviewer")
}
