package logging

import (
	"fmt"
	"strings"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/meridian-mesh/meridian/internal/quote"
)

// New returns a JSON production logger at level ("debug", "info", "warn", "error").
// format "console" gives a human-readable logger for local runs.
func New(level, format string) (*zap.Logger, error) {
	lvl, err := parseLevel(level)
	if err != nil {
		return nil, err
	}
	cfg := zap.NewProductionConfig()
	if format == "console" {
		cfg = zap.NewDevelopmentConfig()
	} else if format != "" && format != "json" {
		return nil, fmt.Errorf("log format %s: want json or console", quote.String(format))
	}
	cfg.Level = zap.NewAtomicLevelAt(lvl)
	return cfg.Build()
}

func parseLevel(level string) (zapcore.Level, error) {
	var lvl zapcore.Level
	if err := lvl.UnmarshalText([]byte(level)); err != nil {
		// zap's error repeats the whole value: quote a prefix only.
		return lvl, fmt.Errorf("log level %s: want debug, info, warn or error", quote.String(level))
	}
	return lvl, nil
}

// ProxyFilterLevel reads linkerd2-proxy's log filter ("warn,linkerd=info"): the level given
// for linkerd (the proxy's own code), else the first bare level, else info. trace reads
// debug and off error.
func ProxyFilterLevel(filter string) string {
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

// CheckProxyFilter reports a log filter the proxy cannot start with (its level is unknown).
func CheckProxyFilter(filter string) error {
	_, err := parseLevel(ProxyFilterLevel(filter))
	return err
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
