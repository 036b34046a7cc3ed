package main

import (
	"flag"

	"go.uber.org/zap"

	"github.com/meridian-mesh/meridian/internal/logging"
	"github.com/meridian-mesh/meridian/internal/serve"
)

// logOptions are what a command's logging flags say.
type logOptions struct{ level, format string }

// serverLogFlags registers the logging flags of a server command on fs: --log-level (default
// info, described by levelUsage) and --log-format (default json).
func serverLogFlags(fs *flag.FlagSet, levelUsage string) *logOptions {
	o := &logOptions{}
	fs.StringVar(&o.level, "log-level", "info", levelUsage)
	fs.StringVar(&o.format, "log-format", "json", "log format: json or console")
	return o
}

// consoleLogFlags registers --log-level (default warn, described by levelUsage) on fs for a
// command a person runs in a terminal; its log is always in the console format.
func consoleLogFlags(fs *flag.FlagSet, levelUsage string) *logOptions {
	o := &logOptions{format: "console"}
	fs.StringVar(&o.level, "log-level", "warn", levelUsage)
	return o
}

// logger builds the logger the flags ask for, after parsing; the caller defers its Sync.
func (o *logOptions) logger() (*zap.Logger, error) { return logging.New(o.level, o.format) }

// newProcess builds the logger the flags ask for and the process (internal/serve) whose
// admin endpoints listen on adminAddr; its logger is the process's Log. The caller defers
// the returned func, which syncs the log.
func newProcess(o *logOptions, adminAddr string) (*serve.Process, func(), error) {
	log, err := o.logger()
	if err != nil {
		return nil, nil, err
	}
	return serve.New(log, adminAddr), func() { _ = log.Sync() }, nil
}
