package proxy

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strconv"
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
	port, timeout := portFlag(4191), positiveDuration(2*time.Minute)
	fs.Var(&port, "port", "the proxy's admin `port` on this host")
	fs.Var(&timeout, "timeout", "how long (a `duration`) to wait for the proxy to be ready")
	if err := parse(); err != nil {
		return err
	}
	return Await(ctx, int(port), time.Duration(timeout))
}

// portFlag is a TCP port flag that refuses what is not one as it is parsed, so that the
// command line's parser reports it as it reports any malformed flag (a usage error).
type portFlag int

func (p *portFlag) String() string { return strconv.Itoa(int(*p)) }
func (p *portFlag) Set(s string) error {
	v, err := strconv.Atoi(s)
	if err != nil || v < 1 || v > 65535 {
		return errors.New("want a port, 1 to 65535")
	}
	*p = portFlag(v)
	return nil
}

// positiveDuration is a duration flag that refuses zero and less as it is parsed.
type positiveDuration time.Duration

func (d *positiveDuration) String() string { return time.Duration(*d).String() }
func (d *positiveDuration) Set(s string) error {
	v, err := time.ParseDuration(s)
	if err != nil || v <= 0 {
		return errors.New("want a positive duration such as 30s")
	}
	*d = positiveDuration(v)
	return nil
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
