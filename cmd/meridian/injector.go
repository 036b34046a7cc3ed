package main

import (
	"context"
	"fmt"
	"net"

	"github.com/meridian-mesh/meridian/injector"
	"github.com/meridian-mesh/meridian/internal/kube"
)

func init() {
	register(&command{
		name:    "injector",
		summary: "serve the proxy injector admission webhook (HTTPS 8443, admin 9995)",
		run:     runInjector,
	})
}

func runInjector(ctx context.Context, args []string) error {
	cfg := injector.DefaultServerConfig()
	stampVersion(&cfg.Config, "meridian/injector")
	fs := newFlagSet("injector")
	addr := fs.String("addr", ":8443", "HTTPS address of the webhook")
	adminAddr := fs.String("admin-addr", ":9995", adminUsage)
	var pprof bool
	pprofFlag(fs, &pprof)
	fs.StringVar(&cfg.CertFile, "tls-cert", cfg.CertFile, "webhook serving certificate (PEM), reloaded on change")
	fs.StringVar(&cfg.KeyFile, "tls-key", cfg.KeyFile, "webhook serving key (PEM), reloaded on change")
	kubeconfig := fs.String("kubeconfig", "", kube.KubeconfigUsage)
	fs.StringVar(&cfg.TrustAnchorsConfigMap, "trust-anchors-configmap", cfg.TrustAnchorsConfigMap, "ConfigMap (key ca-bundle.crt) in the control-plane namespace read for the trust anchors when no file is given")
	logOpts := serverLogFlags(fs, "log level")
	flagsSet := injProxyFlags(fs, &cfg.Config)
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	if _, err := flagsSet(); err != nil {
		return err
	}
	srv, syncLog, err := newProcess(logOpts, *adminAddr)
	if err != nil {
		return err
	}
	defer syncLog()
	kc, err := kube.NewClients(*kubeconfig)
	if err != nil {
		return err
	}
	srv.Pprof = pprof
	lis, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", *addr, err)
	}
	defer lis.Close()
	wh, err := injector.NewServer(ctx, cfg, injector.Deps{Kube: kc.Typed, Listener: lis, Registerer: srv.Registry, Logger: srv.Log})
	if err != nil {
		return err
	}
	srv.Group.Add("webhook", wh)
	if err := srv.Listen(); err != nil {
		return err
	}
	defer srv.Close()
	return srv.Run(ctx)
}
