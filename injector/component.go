package injector

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// ServerConfig configures the webhook server: what it injects, and where its serving keypair
// and the proxies' trust anchors come from.
type ServerConfig struct {
	Config
	// CertFile and KeyFile are the webhook's serving keypair (PEM), reloaded on change.
	CertFile, KeyFile string
	// CertPoll is the period of the keypair's safety-net re-read.
	CertPoll time.Duration
	// TrustAnchorsConfigMap (key ca-bundle.crt, in ControlPlaneNamespace) is read for the
	// trust anchors when Config.TrustAnchorsPEM is empty; empty: not read.
	TrustAnchorsConfigMap string
}

// DefaultServerConfig returns the webhook server's defaults: Linkerd's mount paths.
func DefaultServerConfig() ServerConfig {
	return ServerConfig{
		Config:                DefaultConfig(),
		CertFile:              "/var/run/linkerd/tls/tls.crt",
		KeyFile:               "/var/run/linkerd/tls/tls.key",
		CertPoll:              time.Minute,
		TrustAnchorsConfigMap: "linkerd-identity-trust-roots",
	}
}

// Deps are what NewServer needs besides its config.
type Deps struct {
	Kube       kubernetes.Interface  // namespaces (and the trust anchors ConfigMap); required
	Listener   net.Listener          // where HTTPS is served; required
	Registerer prometheus.Registerer // nil: metrics not exported
	Logger     *zap.Logger           // nil: no logging
}

// Server is the admission webhooks as a component: Run serves HTTPS on its listener with the
// current keypair until ctx ends: the proxy injector, and the ServiceProfile validator at
// ServiceProfilePath.
type Server struct {
	wh    http.Handler
	certs *CertReloader
	lis   net.Listener
	log   *zap.Logger
}

// NewServer builds the webhook, loads its keypair (failing when it cannot) and reads the
// trust anchors. ctx bounds the start-up reads.
func NewServer(ctx context.Context, cfg ServerConfig, deps Deps) (*Server, error) {
	if deps.Kube == nil || deps.Listener == nil {
		return nil, errors.New("injector: a Kubernetes client and a listener are required")
	}
	log := deps.Logger
	if log == nil {
		log = zap.NewNop()
	}
	if cfg.TrustAnchorsPEM == "" && cfg.TrustAnchorsConfigMap != "" {
		gctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		cm, err := deps.Kube.CoreV1().ConfigMaps(cfg.ControlPlaneNamespace).Get(gctx, cfg.TrustAnchorsConfigMap, metav1.GetOptions{})
		cancel()
		switch {
		case err == nil:
			cfg.TrustAnchorsPEM = cm.Data["ca-bundle.crt"]
		case apierrors.IsNotFound(err):
			log.Warn("trust anchors ConfigMap not found; proxies get no trust anchors", zap.String("configmap", cfg.ControlPlaneNamespace+"/"+cfg.TrustAnchorsConfigMap))
		default:
			return nil, fmt.Errorf("read trust anchors ConfigMap %s/%s: %w", cfg.ControlPlaneNamespace, cfg.TrustAnchorsConfigMap, err)
		}
	}
	metrics, err := NewMetrics(deps.Registerer)
	if err != nil {
		return nil, err
	}
	wh, err := NewWebhook(cfg.Config, &KubeNamespaces{Client: deps.Kube}, metrics, log)
	if err != nil {
		return nil, err
	}
	certs, err := NewCertReloader(cfg.CertFile, cfg.KeyFile, cfg.CertPoll, log)
	if err != nil {
		return nil, err
	}
	log.Info("proxy injector ready", zap.String("control_plane_ns", cfg.ControlPlaneNamespace), zap.String("proxy_image", cfg.Proxy.Image+":"+cfg.Proxy.Version))
	return &Server{wh: Handler(wh, NewProfileValidator(log)), certs: certs, lis: deps.Listener, log: log}, nil
}

// Run serves the webhook until ctx ends (see Serve).
func (s *Server) Run(ctx context.Context) error { return Serve(ctx, s.lis, s.wh, s.certs, s.log) }
