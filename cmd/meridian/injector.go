package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/meridian-mesh/meridian/injector"
	"github.com/meridian-mesh/meridian/internal/admin"
	"github.com/meridian-mesh/meridian/internal/kube"
	"github.com/meridian-mesh/meridian/internal/logging"
	"go.uber.org/zap"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func init() {
	register(&command{
		name:    "injector",
		summary: "serve the proxy injector admission webhook (HTTPS 8443, admin 9995)",
		run:     runInjector,
	})
}

func runInjector(ctx context.Context, args []string) error {
	cfg := injector.DefaultConfig()
	cfg.CreatedBy = "meridian/injector " + version
	if version != "dev" {
		cfg.Proxy.Version = version
	}
	fs := newFlagSet("injector")
	addr := fs.String("addr", ":8443", "HTTPS address of the webhook")
	adminAddr := fs.String("admin-addr", ":9995", "admin address (/metrics, /live, /ready, /debug/pprof/)")
	certFile := fs.String("tls-cert", "/var/run/linkerd/tls/tls.crt", "webhook serving certificate (PEM), reloaded on change")
	keyFile := fs.String("tls-key", "/var/run/linkerd/tls/tls.key", "webhook serving key (PEM), reloaded on change")
	kubeconfig := fs.String("kubeconfig", "", kube.KubeconfigUsage)
	anchorsCM := fs.String("trust-anchors-configmap", "linkerd-identity-trust-roots", "ConfigMap (key ca-bundle.crt) in the control-plane namespace read for the trust anchors when no file is given")
	logLevel := fs.String("log-level", "info", "log level")
	logFormat := fs.String("log-format", "json", "log format: json or console")
	flagsSet := injProxyFlags(fs, &cfg)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if e, ok := flagsSet()["error"]; ok {
		return errors.New(e)
	}
	log, err := logging.New(*logLevel, *logFormat)
	if err != nil {
		return err
	}
	defer func() { _ = log.Sync() }()

	kc, err := kube.NewClients(*kubeconfig)
	if err != nil {
		return err
	}
	client := kc.Typed
	if cfg.TrustAnchorsPEM == "" && *anchorsCM != "" {
		gctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		cm, err := client.CoreV1().ConfigMaps(cfg.ControlPlaneNamespace).Get(gctx, *anchorsCM, metav1.GetOptions{})
		cancel()
		switch {
		case err == nil:
			cfg.TrustAnchorsPEM = cm.Data["ca-bundle.crt"]
		case apierrors.IsNotFound(err):
			log.Warn("trust anchors ConfigMap not found; proxies get no trust anchors", zap.String("configmap", cfg.ControlPlaneNamespace+"/"+*anchorsCM))
		default:
			return fmt.Errorf("read trust anchors ConfigMap %s/%s: %w", cfg.ControlPlaneNamespace, *anchorsCM, err)
		}
	}

	reg := newRegistry()
	metrics, err := injector.NewMetrics(reg)
	if err != nil {
		return err
	}
	wh, err := injector.NewWebhook(cfg, &injector.KubeNamespaces{Client: client}, metrics, log)
	if err != nil {
		return err
	}
	certs, err := injector.NewCertReloader(*certFile, *keyFile, time.Minute, log)
	if err != nil {
		return err
	}
	lis, adminLis, err := listenBoth(*addr, *adminAddr)
	if err != nil {
		return err
	}
	log.Info("proxy injector serving", zap.String("addr", lis.Addr().String()), zap.String("admin", adminLis.Addr().String()),
		zap.String("control_plane_ns", cfg.ControlPlaneNamespace), zap.String("proxy_image", cfg.Proxy.Image+":"+cfg.Proxy.Version))

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 2)
	go func() { errc <- injector.Serve(ctx, lis, wh, certs, log) }()
	go func() { errc <- admin.Serve(ctx, adminLis, admin.Handler(reg, nil)) }()
	first := <-errc
	cancel()
	second := <-errc
	if first != nil {
		return first
	}
	return second
}
