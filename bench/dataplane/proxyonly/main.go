// Command proxyonly is `meridian proxy` built alone: the same proxy (package proxy, the
// LINKERD2_PROXY_* configuration of proxy/config, the admin server of internal/serve), with
// none of the control plane, the Kubernetes client or Helm linked in. The data-plane
// benchmark runs it with `meridian bench proxy --proxy-binary` to show how much of a
// `meridian proxy` process's resident memory is the rest of the binary: the pages of the
// executable that package initialization touches, shared with every process running it
// but counted in each one's RSS.
//
// It runs as `proxyonly [proxy] [flags]`, configured like `meridian proxy` (its log level
// is the first bare level of LINKERD2_PROXY_LOG). It is a measuring device, not a command
// Meridian ships.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/meridian-mesh/meridian/internal/logging"
	"github.com/meridian-mesh/meridian/proxy"
	"github.com/meridian-mesh/meridian/proxy/config"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:])
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "proxyonly:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	if len(args) > 0 && args[0] == "proxy" {
		args = args[1:]
	}
	cfg, err := config.FromEnv(os.LookupEnv)
	if err != nil {
		return err
	}
	fs := flag.NewFlagSet("proxy", flag.ContinueOnError)
	cfg.Flags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	format := "console"
	if cfg.LogFormat == "json" {
		format = "json"
	}
	log, err := logging.New(level(cfg.Log), format)
	if err != nil {
		return err
	}
	defer func() { _ = log.Sync() }()
	return proxy.Serve(ctx, cfg, log)
}

// level is the first bare level of a linkerd2-proxy log filter ("warn,linkerd=info").
func level(filter string) string {
	for _, part := range strings.Split(filter, ",") {
		switch part = strings.ToLower(strings.TrimSpace(part)); part {
		case "trace", "debug":
			return "debug"
		case "info", "warn", "error":
			return part
		case "off":
			return "error"
		}
	}
	return "info"
}
