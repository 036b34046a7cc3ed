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

	"github.com/meridian-mesh/meridian/internal/run"
	"github.com/meridian-mesh/meridian/internal/tlsid"
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
	// trust anchors when Config.TrustAnchorsPEM is empty, and again every CertPoll; empty: not
	// read.
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
	wh      http.Handler
	certs   *CertReloader
	lis     net.Listener
	log     *zap.Logger
	anchors *anchorsWatch // nil: the anchors were given
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
	metrics, err := NewMetrics(deps.Registerer)
	if err != nil {
		return nil, err
	}
	wh, err := NewWebhook(cfg.Config, &KubeNamespaces{Client: deps.Kube}, metrics, log)
	if err != nil {
		return nil, err
	}
	s := &Server{wh: Handler(wh, NewProfileValidator(log)), lis: deps.Listener, log: log}
	if cfg.TrustAnchorsPEM == "" && cfg.TrustAnchorsConfigMap != "" {
		every := cfg.CertPoll
		if every <= 0 {
			every = time.Minute // as the keypair's re-read
		}
		s.anchors = &anchorsWatch{kube: deps.Kube, ns: cfg.ControlPlaneNamespace, name: cfg.TrustAnchorsConfigMap, every: every, wh: wh, log: log}
		if err := s.anchors.read(ctx); err != nil {
			return nil, err
		}
	}
	if s.certs, err = NewCertReloader(cfg.CertFile, cfg.KeyFile, cfg.CertPoll, log); err != nil {
		return nil, err
	}
	log.Info("proxy injector ready", zap.String("control_plane_ns", cfg.ControlPlaneNamespace), zap.String("proxy_image", cfg.Proxy.Image+":"+cfg.Proxy.Version))
	return s, nil
}

// Run serves the webhook until ctx ends (see Serve), re-reading the trust anchors' ConfigMap
// meanwhile.
func (s *Server) Run(ctx context.Context) error {
	if s.anchors == nil {
		return Serve(ctx, s.lis, s.wh, s.certs, s.log)
	}
	actx, cancel := context.WithCancel(ctx) // the watch ends with Serve, early or not
	done := make(chan struct{})
	go func() { defer close(done); s.anchors.run(actx) }()
	defer func() { cancel(); <-done }()
	return Serve(ctx, s.lis, s.wh, s.certs, s.log)
}

// anchorsWatch keeps the webhook's trust anchors those of the ConfigMap ns/name (key
// ca-bundle.crt), re-read every period: a rotation that adds an anchor reaches the proxies
// injected after it, without a restart, and pods are refused while there are none.
type anchorsWatch struct {
	kube     kubernetes.Interface
	ns, name string
	every    time.Duration
	wh       *Webhook
	log      *zap.Logger
	last     string // the bundle last read (good or not)
	read1    bool   // whether one was read
}

// read reads the ConfigMap once: a missing one, or one without ca-bundle.crt, leaves the
// webhook without anchors (it refuses pods). A bundle that tlsid.TrustAnchorBundle refuses
// (not certificates only, or a block cut short) is logged and the last good anchors stay,
// so that a key written there by mistake never goes into pods' specs; pods get the bundle's
// certificates alone. Another error is returned. Each content is logged once.
func (a *anchorsWatch) read(ctx context.Context) error {
	gctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	cm, err := a.kube.CoreV1().ConfigMaps(a.ns).Get(gctx, a.name, metav1.GetOptions{})
	cancel()
	pem := ""
	switch {
	case err == nil:
		pem = cm.Data["ca-bundle.crt"]
	case apierrors.IsNotFound(err):
	default:
		return fmt.Errorf("read trust anchors ConfigMap %s/%s: %w", a.ns, a.name, err)
	}
	if a.read1 && pem == a.last {
		return nil
	}
	a.read1, a.last = true, pem
	cmName := zap.String("configmap", a.ns+"/"+a.name)
	if pem == "" {
		a.log.Warn("no trust anchors in the ConfigMap (missing, or no ca-bundle.crt): pods to inject are refused until there are", cmName)
		a.wh.SetTrustAnchors("")
		return nil
	}
	bundle, err := tlsid.TrustAnchorBundle([]byte(pem))
	if err != nil {
		if held := a.wh.anchors.Load(); held != nil && *held != "" {
			a.log.Warn("trust anchors in the ConfigMap refused; the last good ones stay", cmName, zap.Error(err))
		} else {
			a.log.Warn("trust anchors in the ConfigMap refused: pods to inject are refused until there are valid ones", cmName, zap.Error(err))
		}
		return nil
	}
	a.log.Info("trust anchors read", cmName, zap.Int("bytes", len(bundle)))
	a.wh.SetTrustAnchors(string(bundle))
	return nil
}

// run re-reads the ConfigMap every period until ctx ends; a failed read keeps the anchors.
func (a *anchorsWatch) run(ctx context.Context) {
	run.Every(ctx, a.every, func() {
		if err := a.read(ctx); err != nil && ctx.Err() == nil {
			a.log.Warn("trust anchors not re-read; the last ones stay", zap.Error(err))
		}
	})
}
