package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"go.uber.org/zap"
	"golang.org/x/term"

	"github.com/meridian-mesh/meridian/internal/demo"
	"github.com/meridian-mesh/meridian/internal/quote"
	"github.com/meridian-mesh/meridian/internal/run"
	"github.com/meridian-mesh/meridian/internal/serve"
)

func init() {
	register(&command{name: "demo", summary: "the whole mesh on one machine with traffic and a live view (what make run starts; no cluster needed); subcommands app, traffic", run: runDemo})
}

func runDemo(ctx context.Context, args []string) error {
	if len(args) > 0 {
		switch args[0] {
		case "app":
			return runDemoApp(ctx, args[1:])
		case "traffic":
			return runDemoTraffic(ctx, args[1:])
		}
	}
	cfg := demo.DefaultConfig("deploy/examples")
	fs := newFlagSet("demo")
	withSubcommands(fs, "app", "traffic")
	fs.StringVar(&cfg.Dir, "dir", cfg.Dir, "the example cluster: a directory of Kubernetes YAML (Services, EndpointSlices, Pods, policy), followed for changes")
	fs.StringVar(&cfg.CacheDir, "cache-dir", cfg.CacheDir, "where the identity (made on first run), the gossip key, tokens and the processes' logs are kept")
	fs.IntVar(&cfg.Replicas, "replicas", cfg.Replicas, "destination replicas in the ring")
	fs.Float64Var(&cfg.Rate, "rate", cfg.Rate, "requests per second the traffic generator sends to each service")
	fs.BoolVar(&cfg.Once, "once", false, "bring everything up, send traffic, apply the deny policy, kill a replica, print the summary and the checks, stop; exit 1 if a check failed")
	net := fs.Uint("net", 0, "run on 127.N.0.0/16 instead of 127.0.0.0/16 (on a copy of --dir), so that two demos can share a machine")
	fs.StringVar(&cfg.Binary, "binary", "", "the meridian binary the processes run (default: this one)")
	fs.DurationVar(&cfg.StartTimeout, "start-timeout", cfg.StartTimeout, "bound of each phase of the start")
	logLevel := fs.String("log-level", "info", "level of the demo's own log (CACHE-DIR/demo.log)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected arguments %s (subcommands: app, traffic)", errUsage, quote.Message(fmt.Sprintf("%q", fs.Args())))
	}
	if *net > 254 {
		return fmt.Errorf("%w: --net %d: want 0 to 254", errUsage, *net)
	}
	// demo.Run's bound, checked here before anything starts, as a usage error.
	if cfg.Replicas < 1 || cfg.Replicas > 9 {
		return fmt.Errorf("%w: --replicas %d: want 1 to 9", errUsage, cfg.Replicas)
	}
	// The traffic generator's bound, checked before the mesh is brought up for it.
	if !(cfg.Rate > 0 && cfg.Rate <= 1000) {
		return fmt.Errorf("%w: --rate %v: want a rate in (0, 1000] requests per second", errUsage, cfg.Rate)
	}
	cfg.Net = byte(*net)
	var err error
	if cfg.Binary, err = orThisExecutable(cfg.Binary); err != nil {
		return err
	}
	if err := os.MkdirAll(cfg.CacheDir, 0o755); err != nil {
		return err
	}
	log, err := fileLogger(filepath.Join(cfg.CacheDir, "demo.log"), *logLevel)
	if err != nil {
		return err
	}
	defer func() { _ = log.Sync() }()
	cfg.Log, cfg.Out = log, stdout
	if f, ok := stdout.(*os.File); ok && term.IsTerminal(int(f.Fd())) && !cfg.Once {
		cfg.Terminal = true
		cfg.Size = func() (int, int) {
			w, h, err := term.GetSize(int(f.Fd()))
			if err != nil {
				return 0, 0
			}
			return w, h
		}
		if term.IsTerminal(int(os.Stdin.Fd())) {
			cfg.Keys = demo.Keys(os.Stdin)
		}
	}
	return demo.Run(ctx, cfg)
}

// fileLogger logs to path (appending), in the console format.
func fileLogger(path, level string) (*zap.Logger, error) {
	zc := zap.NewDevelopmentConfig()
	if err := zc.Level.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("%w: --log-level %s", errUsage, quote.Prefix(level, 64))
	}
	zc.OutputPaths, zc.ErrorOutputPaths = []string{path}, []string{path}
	zc.DisableStacktrace = true
	return zc.Build()
}

// runDemoApp is `meridian demo app`: one pod's application (what the demo runs for each pod).
func runDemoApp(ctx context.Context, args []string) error {
	var cfg demo.AppConfig
	fs := newFlagSet("demo app")
	fs.StringVar(&cfg.Pod, "pod", "", "the pod, namespace/name, named in every answer")
	fs.Var((*listFlag)(&cfg.HTTP), "http", "serve the HTTP echo on this address (repeatable)")
	fs.Var((*listFlag)(&cfg.GRPC), "grpc", "serve the gRPC service (grpc.health.v1.Health) on this address (repeatable)")
	fs.Var((*listFlag)(&cfg.TCP), "tcp", "serve the line-echo TCP \"database\" on this address (repeatable)")
	return runDemoProcess(ctx, fs, args, "app", func(p *serve.Process) (run.Component, error) {
		return demo.NewApp(cfg, p.Registry, p.Log)
	})
}

// runDemoTraffic is `meridian demo traffic`: the traffic generator of the loadgen pod.
func runDemoTraffic(ctx context.Context, args []string) error {
	var cfg demo.TrafficConfig
	fs := newFlagSet("demo traffic")
	fs.Func("target", "a service to call: http://host[:port][/path], grpc://host:port or tcp://host:port (repeatable)", func(s string) error {
		t, err := demo.ParseTarget(s)
		if err == nil {
			cfg.Targets = append(cfg.Targets, t)
		}
		return err
	})
	fs.StringVar(&cfg.Proxy, "proxy", "127.0.0.1:4140", "the outbound listener of the pod's proxy")
	fs.StringVar(&cfg.ClientID, "client-id", "", "the pod's identity: a server that reports another client identity counts as a failure")
	fs.Float64Var(&cfg.Rate, "rate", 5, "requests (TCP: connections) per second per target")
	fs.DurationVar(&cfg.Timeout, "timeout", 5*time.Second, "timeout of each request")
	return runDemoProcess(ctx, fs, args, "traffic", func(p *serve.Process) (run.Component, error) {
		t, err := demo.NewTraffic(cfg, p.Registry, p.Log)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", errUsage, err)
		}
		return t, nil
	})
}

// runDemoProcess is the rest of a demo pod's process once its own flags are on fs: it adds
// --metrics-addr and --log-level, parses args, and runs the component newComponent makes (it
// reads the flags' values) under name, with /metrics, /live and /ready.
func runDemoProcess(ctx context.Context, fs *flag.FlagSet, args []string, name string, newComponent func(*serve.Process) (run.Component, error)) error {
	metricsAddr := fs.String("metrics-addr", "127.0.0.1:9100", "address of /metrics, /live and /ready")
	logOpts := consoleLogFlags(fs, "log level")
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	p, syncLog, err := newProcess(logOpts, *metricsAddr)
	if err != nil {
		return err
	}
	defer syncLog()
	c, err := newComponent(p)
	if err != nil {
		return err
	}
	p.Group.Add(name, c)
	return listenAndRun(ctx, p)
}

func listenAndRun(ctx context.Context, p *serve.Process) error {
	if err := p.Listen(); err != nil {
		return err
	}
	defer p.Close()
	return p.Run(ctx)
}
