package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/meridian-mesh/meridian/internal/logging"
	"github.com/meridian-mesh/meridian/proxy"
	"github.com/meridian-mesh/meridian/proxy/config"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

func init() {
	register(&command{
		name:    "proxy",
		summary: "the data plane: outbound 127.0.0.1:4140, inbound :4143, admin :4191 (configured by LINKERD2_PROXY_* or flags)",
		run:     runProxy,
	})
}

func runProxy(ctx context.Context, args []string) error {
	cfg, err := config.FromEnv(os.LookupEnv)
	if err != nil {
		return err
	}
	fs := newFlagSet("proxy")
	cfg.Flags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	}
	level, format := proxyLogLevel(cfg.Log), "console"
	if cfg.LogFormat == "json" {
		format = "json"
	}
	log, err := logging.New(level, format)
	if err != nil {
		return fmt.Errorf("LINKERD2_PROXY_LOG=%q: %w", cfg.Log, err)
	}
	// The proxy's warnings (a control-plane service unreachable, retrying) are operational,
	// not bugs: no stack traces under them, whatever the format.
	log = log.WithOptions(zap.AddStacktrace(zapcore.DPanicLevel))
	defer func() { _ = log.Sync() }()
	return proxy.Serve(ctx, cfg, log)
}

// proxyLogLevel reads linkerd2-proxy's log filter ("warn,linkerd=info"): the level given for
// linkerd (the proxy's own code), else the first bare level, else info.
func proxyLogLevel(filter string) string {
	level := "info"
	first := true
	for _, part := range strings.Split(filter, ",") {
		part = strings.TrimSpace(part)
		if target, lvl, ok := strings.Cut(part, "="); ok {
			if strings.HasPrefix(target, "linkerd") {
				return normLevel(lvl)
			}
			continue
		}
		if first && part != "" {
			level, first = normLevel(part), false
		}
	}
	return level
}

func normLevel(s string) string {
	switch s = strings.ToLower(strings.TrimSpace(s)); s {
	case "trace", "debug":
		return "debug"
	case "off":
		return "error"
	}
	return s
}
