package proxy

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/meridian-mesh/meridian/internal/logging"
	"github.com/meridian-mesh/meridian/internal/quote"
	"github.com/meridian-mesh/meridian/proxy/config"
)

// Command runs the proxy as a process: the LINKERD2_PROXY_* environment (lookup), overridden
// by the flags registered on fs, which parse then parses (returning its error as it is: a
// usage error, or flag.ErrHelp; a bad variable no flag replaced is reported after it); the log of LINKERD2_PROXY_LOG and _LOG_FORMAT; then Serve
// until ctx ends. `meridian proxy` and `meridian-proxy` (the proxy built alone, which pods
// run) are this function with their own command-line conventions.
func Command(ctx context.Context, lookup func(string) (string, bool), fs *flag.FlagSet, parse func() error) error {
	// A bad variable is reported once the flags are parsed: -h still answers, and a flag
	// can replace the variable.
	cfg, envErr := config.FromEnv(lookup)
	cfg.Flags(fs)
	if err := parse(); err != nil {
		return err
	}
	if err := config.Unoverridden(envErr, fs); err != nil {
		return err
	}
	format, known := logFormat(cfg.LogFormat)
	log, err := logging.New(logging.ProxyFilterLevel(cfg.Log), format)
	if err != nil {
		return fmt.Errorf("LINKERD2_PROXY_LOG (--log): %w", err) // err quotes a prefix of it
	}
	// The proxy's warnings (a control-plane service unreachable, retrying) are operational,
	// not bugs: no stack traces under them, whatever the format.
	log = log.WithOptions(zap.AddStacktrace(zapcore.DPanicLevel))
	if !known {
		log.Warn("LINKERD2_PROXY_LOG_FORMAT (--log-format) is neither plain nor json: logging plain",
			zap.String("value", quote.Prefix(cfg.LogFormat, 64)))
	}
	defer func() { _ = log.Sync() }()
	return Serve(ctx, cfg, log)
}

// AwaitCommand is `meridian-proxy await` (and `meridian proxy await`): Await with the flags
// parse parses from fs (--port, the admin port; --timeout).
func AwaitCommand(ctx context.Context, fs *flag.FlagSet, parse func() error) error {
	port := fs.Int("port", 4191, "the proxy's admin port on this host")
	timeout := fs.Duration("timeout", 2*time.Minute, "how long to wait for the proxy to be ready")
	if err := parse(); err != nil {
		return err
	}
	if *port < 1 || *port > 65535 || *timeout <= 0 {
		return fmt.Errorf("await: --port %d, --timeout %s: want a port and a positive duration", *port, *timeout)
	}
	return Await(ctx, *port, *timeout)
}

// logFormat maps LINKERD2_PROXY_LOG_FORMAT to the logger's format: json or plain in any
// case (empty: plain). Anything else logs plain, and known is false, so that it is reported
// once the logger exists rather than silently ignored.
func logFormat(v string) (format string, known bool) {
	switch {
	case strings.EqualFold(v, "json"):
		return "json", true
	case strings.EqualFold(v, "plain"), v == "":
		return "console", true
	}
	return "console", false
}
