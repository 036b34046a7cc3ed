package logging

import (
	"fmt"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/meridian-mesh/meridian/internal/quote"
)

// New returns a JSON production logger at level ("debug", "info", "warn", "error").
// format "console" gives a human-readable logger for local runs.
func New(level, format string) (*zap.Logger, error) {
	var lvl zapcore.Level
	if err := lvl.UnmarshalText([]byte(level)); err != nil {
		// zap's error repeats the whole value: quote a prefix only.
		return nil, fmt.Errorf("log level %s: want debug, info, warn or error", quote.String(level))
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
