package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"go.uber.org/zap"

	"github.com/meridian-mesh/meridian/bench"
	"github.com/meridian-mesh/meridian/bench/dataplane"
	"github.com/meridian-mesh/meridian/bench/feed"
	"github.com/meridian-mesh/meridian/internal/quote"
	"github.com/meridian-mesh/meridian/shard/source"
)

func init() {
	register(&command{name: "bench", summary: "load harness: synthetic cluster, real replicas, streams and churn; 'bench proxy': the data plane against nginx", run: runBench})
	// The replicas the harness starts read its synthetic cluster: meridian destination
	// --source feed:ADDR.
	sourceKinds["feed"] = func(addr string, log *zap.Logger) (source.Source, error) {
		if addr == "" {
			return nil, fmt.Errorf("--source feed: needs the harness's address, as in feed:127.0.0.1:7000")
		}
		return feed.NewSource(addr, log), nil
	}
}

// parseShardList parses "1,4".
func parseShardList(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("--compare-shards %s: %s", quote.Prefix(s, 64), quote.Message(err.Error()))
		}
		out = append(out, n)
	}
	return out, nil
}

func runBench(ctx context.Context, args []string) error {
	if len(args) > 0 && args[0] == "proxy" {
		return runBenchProxy(ctx, args[1:])
	}
	cfg := bench.DefaultConfig()
	fs := newFlagSet("bench")
	withSubcommands(fs, "proxy")
	fs.StringVar(&cfg.Source, "source", cfg.Source, "where the replicas read the cluster: feed (the harness serves it) or kubernetes (the harness starts the kube-apiserver and etcd that make kube-bin builds, creates the cluster through the API and runs replicas with --source kubernetes)")
	fs.StringVar(&cfg.KubeAssets, "kube-assets", cfg.KubeAssets, "with --source kubernetes: directory of kube-apiserver and etcd (default: $KUBEBUILDER_ASSETS, else .cache/kube/<version>/bin of the source tree or the working directory)")
	fs.Float64Var(&cfg.ScaleShare, "scale-share", cfg.ScaleShare, "with --source kubernetes: fraction of churn changes that scale a slice up or down (half each); the others patch readiness or replace an endpoint")
	fs.BoolVar(&cfg.KubePods, "kube-pods", cfg.KubePods, "with --source kubernetes: create a running Pod for every endpoint, named by its targetRef (else endpoints have no targetRef)")
	fs.BoolVar(&cfg.KubePolicy, "kube-policy", cfg.KubePolicy, "with --source kubernetes: also create a ServiceProfile for every Service, a Server in every namespace and 3 Nodes with zones, which the replicas then watch too")
	fs.IntVar(&cfg.CreateConcurrency, "create-concurrency", cfg.CreateConcurrency, "with --source kubernetes: API requests in flight while the cluster is created")
	fs.IntVar(&cfg.Cluster.Services, "services", cfg.Cluster.Services, "services in the synthetic cluster")
	fs.IntVar(&cfg.Cluster.EndpointsPerService, "endpoints-per-service", cfg.Cluster.EndpointsPerService, "endpoints per service (EndpointSlices of at most 100)")
	fs.IntVar(&cfg.Cluster.Namespaces, "namespaces", cfg.Cluster.Namespaces, "namespaces the services are spread over")
	fs.Float64Var(&cfg.Cluster.MeshedShare, "meshed-share", cfg.Cluster.MeshedShare, "fraction of pods that are meshed (0..1)")
	fs.Uint64Var(&cfg.Cluster.Seed, "seed", cfg.Cluster.Seed, "seed of the synthetic cluster and of the churn")
	shards := fs.Int("shards", 1, "destination replicas to run")
	compare := fs.String("compare-shards", "", "run the workload at each of these replica counts in turn (e.g. 1,4); overrides --shards")
	fs.BoolVar(&cfg.Ring, "ring", cfg.Ring, "pass the ring flags to replicas even with one shard")
	fs.IntVar(&cfg.ReplicaCPUs, "replica-cpus", cfg.ReplicaCPUs, "GOMAXPROCS of each replica: 0 shares this machine's CPUs among a run's replicas (at least 1 each), as per-pod CPU limits would; -1 leaves Go's default (all CPUs)")
	fs.StringVar(&cfg.NonOwner, "non-owner", cfg.NonOwner, "replicas' --non-owner mode: forward (relay) or redirect (clients reconnect to the owner)")
	fs.IntVar(&cfg.Streams, "streams", cfg.Streams, "Get streams, spread round-robin over services")
	fs.IntVar(&cfg.StreamsPerConn, "streams-per-conn", cfg.StreamsPerConn, "streams sharing one gRPC connection")
	fs.Float64Var(&cfg.Churn, "churn", cfg.Churn, "endpoint changes per second")
	fs.DurationVar(&cfg.Duration, "duration", cfg.Duration, "length of the churn phase")
	fs.DurationVar(&cfg.Settle, "settle", cfg.Settle, "longest wait, after churn, for every stream to reach the truth")
	fs.IntVar(&cfg.Storm, "storm", cfg.Storm, "open this many Get and as many GetProfile streams at once during churn")
	fs.DurationVar(&cfg.StormAt, "storm-at", cfg.StormAt, "when the storm starts, into the churn phase (default: half way)")
	fs.DurationVar(&cfg.JoinAt, "join-at", cfg.JoinAt, "start one more replica this far into the churn phase (0: never)")
	fs.DurationVar(&cfg.KillAt, "kill-at", cfg.KillAt, "kill the last replica this far into the churn phase (0: never)")
	fs.DurationVar(&cfg.MaxKillConverge, "max-kill-converge", cfg.MaxKillConverge, "fail when the streams take longer than this to hold the truth again after --kill-at (0: report only)")
	fs.DurationVar(&cfg.ReadyTimeout, "ready-timeout", cfg.ReadyTimeout, "longest wait for a replica to be ready and for streams' first batches")
	fs.BoolVar(&cfg.DeliverPods, "deliver-pods", cfg.DeliverPods, "hand every endpoint's pod to replicas (for replicas without the source's Pod lookup)")
	fs.StringVar(&cfg.ProfileDir, "profile-dir", cfg.ProfileDir, "save profiles into this directory: each replica's and the harness's CPU over the churn phase, each replica's heap at the end of each run")
	fs.BoolVar(&cfg.KeepLogs, "keep-logs", cfg.KeepLogs, "keep the replicas' logs even when the run succeeds")
	jsonPath := fs.String("json", "", "write every figure as JSON to this file")
	reportPath := fs.String("report", "", "write a self-contained HTML report to this file")
	binary := fs.String("binary", "", "meridian executable for the replicas (default: this one)")
	noProgress := fs.Bool("no-progress", false, "no progress bar")
	logOpts := consoleLogFlags(fs, "log level of the harness")
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	cfg.Shards = []int{*shards}
	if *compare != "" {
		var err error
		if cfg.Shards, err = parseShardList(*compare); err != nil {
			return usageError(err)
		}
	}
	var err error
	if cfg.Binary, err = orThisExecutable(*binary); err != nil {
		return err
	}
	if !*noProgress {
		cfg.Progress = os.Stderr
	}
	if err := cfg.Validate(); err != nil { // before anything starts; bench.Run checks it too
		return usageError(err)
	}
	res, err := runHarness(ctx, logOpts, cfg, bench.Run,
		func(r *bench.Result) bool { return r != nil && len(r.Runs) > 0 }, bench.WriteTable,
		harnessOutput[*bench.Result]{*jsonPath, bench.WriteJSON}, harnessOutput[*bench.Result]{*reportPath, bench.WriteHTML})
	if err != nil {
		return err
	}
	for _, r := range res.Runs {
		if r.FinalStateMismatches != 0 || r.StreamsClosed != 0 || r.LatencyMissed != 0 || r.StormUnanswered != 0 {
			return fmt.Errorf("%d shards: %d final-state mismatches, %d streams closed, %d changes a stream never saw, %d storm streams unanswered",
				r.Shards, r.FinalStateMismatches, r.StreamsClosed, r.LatencyMissed, r.StormUnanswered)
		}
	}
	return nil
}

// runBenchProxy is `meridian bench proxy`: the data-plane benchmark (bench/dataplane).
func runBenchProxy(ctx context.Context, args []string) error {
	cfg := dataplane.DefaultConfig()
	fs := newFlagSet("bench proxy")
	fs.Float64Var(&cfg.Rate, "rate", cfg.Rate, "requests per second, constant (open loop)")
	fs.IntVar(&cfg.Rounds, "rounds", cfg.Rounds, "rounds; each runs every variant for --segment, in a rotating order")
	fs.DurationVar(&cfg.Segment, "segment", cfg.Segment, "measured time of each variant per round")
	fs.DurationVar(&cfg.Warmup, "warmup", cfg.Warmup, "unmeasured warm-up of each variant, before the rounds")
	fs.IntVar(&cfg.Connections, "connections", cfg.Connections, "HTTP/1.1 keep-alive connections (and gRPC calls in flight at most)")
	protocols := fs.String("protocols", "http1,grpc", "protocols to measure: http1, grpc")
	variants := fs.String("variants", "direct,nginx,meridian", "paths to measure: direct (to the app), nginx (a pair of nginx), meridian (a pair of proxies)")
	fs.StringVar(&cfg.Nginx, "nginx", cfg.Nginx, "nginx executable")
	fs.IntVar(&cfg.NginxWorkers, "nginx-workers", cfg.NginxWorkers, "worker_processes of each nginx (0: auto, one per CPU)")
	fs.IntVar(&cfg.ProxyGOMAXPROCS, "proxy-gomaxprocs", cfg.ProxyGOMAXPROCS, "GOMAXPROCS of each proxy (0: Go's default, every CPU); one by default, as Linkerd runs one proxy worker")
	fs.DurationVar(&cfg.ReadyTimeout, "ready-timeout", cfg.ReadyTimeout, "longest wait for each process to be ready")
	fs.StringVar(&cfg.ProfileDir, "profile-dir", cfg.ProfileDir, "save both proxies' CPU and allocation profiles, taken over one more Meridian segment per protocol, into this directory")
	fs.BoolVar(&cfg.KeepLogs, "keep-logs", cfg.KeepLogs, "keep the work directory (configurations, logs) even when the run succeeds")
	jsonPath := fs.String("json", "", "write every figure as JSON to this file")
	check := fs.Bool("check", false, "exit non-zero when a target of issue 13 is missed")
	binary := fs.String("binary", "", "meridian executable for the control plane and the proxies (default: this one)")
	fs.StringVar(&cfg.ProxyBinary, "proxy-binary", "", "executable for the proxies only, run as '<it> proxy' (default: --binary)")
	quiet := fs.Bool("quiet", false, "no progress lines")
	logOpts := consoleLogFlags(fs, "log level of the harness")
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	var err error
	if cfg.Protocols, err = dataplane.ParseProtocols(strings.Split(*protocols, ",")); err != nil {
		return fmt.Errorf("%w: --protocols: %v", errUsage, err)
	}
	if cfg.Variants, err = dataplane.ParseVariants(strings.Split(*variants, ",")); err != nil {
		return fmt.Errorf("%w: --variants: %v", errUsage, err)
	}
	if cfg.Binary, err = orThisExecutable(*binary); err != nil {
		return err
	}
	if !*quiet {
		cfg.Progress = stderr
	}
	if err := cfg.Validate(); err != nil {
		return usageError(err)
	}
	res, err := runHarness(ctx, logOpts, cfg, dataplane.Run,
		func(r *dataplane.Result) bool { return r != nil && len(r.Protocols) > 0 }, dataplane.WriteTable,
		harnessOutput[*dataplane.Result]{*jsonPath, dataplane.WriteJSON})
	if err != nil {
		return err
	}
	if *check {
		return res.MissedError()
	}
	return nil
}

// orThisExecutable returns binary, or this executable's path when binary is empty (the default
// of the --binary flags).
func orThisExecutable(binary string) (string, error) {
	if binary != "" {
		return binary, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("find this executable: %w (pass --binary)", err)
	}
	return exe, nil
}

// harnessOutput is a file a harness's figures may be written to: its path ("" for none) and
// its writer.
type harnessOutput[R any] struct {
	path  string
	write func(path string, res R) error
}

// runHarness runs a load harness (run, with cfg and the logger logOpts describe) and writes
// what it measured, even when the run failed part way: the table to stdout, then every output
// whose path was given. measured reports whether res holds any figures. The error is the
// first of the logger's, the writers' and the run's.
func runHarness[C, R any](ctx context.Context, logOpts *logOptions, cfg C,
	run func(context.Context, C, *zap.Logger) (R, error), measured func(R) bool,
	table func(io.Writer, R) error, outputs ...harnessOutput[R]) (R, error) {
	var res R
	log, err := logOpts.logger()
	if err != nil {
		return res, err
	}
	defer func() { _ = log.Sync() }()
	res, runErr := run(ctx, cfg, log)
	if measured(res) {
		if err := table(stdout, res); err != nil {
			return res, err
		}
		for _, o := range outputs {
			if o.path == "" {
				continue
			}
			if err := o.write(o.path, res); err != nil {
				return res, fmt.Errorf("write %s: %w", o.path, err)
			}
		}
	}
	return res, runErr
}
