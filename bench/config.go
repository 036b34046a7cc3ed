package bench

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/meridian-mesh/meridian/bench/gen"
	"github.com/meridian-mesh/meridian/internal/quote"
)

// Config configures a bench invocation.
type Config struct {
	// Source is where the replicas read the cluster: SourceFeed (the harness's own feed
	// server, bench/feed) or SourceKubernetes (a kube-apiserver and etcd the harness starts,
	// the cluster created through client-go, replicas run with --source kubernetes).
	Source  string
	Cluster gen.Config
	// KubeAssets is the directory of kube-apiserver and etcd for SourceKubernetes (""
	// kubeenv.DefaultAssetsDir).
	KubeAssets string
	// ScaleShare is, with SourceKubernetes, the fraction of churn changes that scale a slice
	// up or down (half each); the others flip an endpoint's readiness or replace it.
	ScaleShare float64
	// KubePods makes, with SourceKubernetes, a running Pod for every endpoint, named by the
	// endpoint's targetRef (two requests per pod: sizes of tens of thousands). Without it
	// endpoints have no targetRef, and so no pod metadata.
	KubePods bool
	// KubePolicy makes, with SourceKubernetes, what the replicas' other watches read: a
	// ServiceProfile for every Service, a policy.linkerd.io Server in every namespace, and
	// kubeNodes Nodes with zones (kube_extra.go).
	KubePolicy bool
	// CreateConcurrency bounds the API requests in flight while the cluster is created.
	CreateConcurrency int
	// Shards lists the replica counts to run the workload at, in order (--compare-shards, or
	// just --shards).
	Shards []int
	// Ring passes the ring flags (ReplicaArgs) to replicas even with one shard; they are always
	// passed with more than one.
	Ring bool
	// NonOwner is the replicas' --non-owner mode: "forward" (they relay streams for services
	// they do not own) or "redirect" (they refuse them naming the owner, and the harness's
	// clients reconnect there, as Meridian's own proxy does).
	NonOwner string
	// Streams is the number of Get streams, spread round-robin over services; StreamsPerConn
	// of them share a gRPC connection, and connections are spread round-robin over replicas.
	Streams, StreamsPerConn int
	// Churn is the rate of changes per second, for Duration.
	Churn    float64
	Duration time.Duration
	// Settle bounds the wait, after churn stops, for every stream to reach the truth.
	Settle time.Duration
	// Storm opens Storm Get and Storm GetProfile streams at once at StormAt (0: mid-run).
	Storm   int
	StormAt time.Duration
	// JoinAt starts one more replica, KillAt kills the last one (0: never); both are offsets
	// into the churn phase.
	JoinAt, KillAt time.Duration
	// MaxKillConverge, when set, fails the run (after reporting it) when the streams take
	// longer than this to hold the truth again after the kill (RunResult.KillConvergeSeconds).
	MaxKillConverge time.Duration
	// ReplicaCPUs is each replica's GOMAXPROCS. 0 shares the machine's CPUs among the
	// replicas of a run (at least one each), as per-pod CPU limits would in a cluster (Go
	// sizes GOMAXPROCS to a container's CPU limit); without that, N replicas on one machine
	// each run a parallel garbage collector sized for the whole machine and take the CPU
	// from one another. -1 leaves Go's default (all CPUs) to every replica.
	ReplicaCPUs int
	// Binary is the meridian executable that replicas run (`<Binary> destination ...`).
	Binary string
	// ReadyTimeout bounds the wait for a replica's /ready.
	ReadyTimeout time.Duration
	// DeliverPods makes the feed hand pods to replicas (OnPod) instead of relying on the
	// source's Pod lookup.
	DeliverPods bool
	// ExtraReplicaArgs are appended to every replica's arguments.
	ExtraReplicaArgs []string
	// Progress receives the progress of each phase (nil: none): a bar on a terminal, else one
	// line per phase when it is done.
	Progress io.Writer
	// ProfileDir, when set, receives each replica's heap profile at the end of each run
	// (shardsN-shardI.heap.pb.gz) and CPU profiles of each replica and of the harness over
	// the churn phase (shardsN-shardI.cpu.pb.gz, shardsN-driver.cpu.pb.gz); read them with
	// go tool pprof.
	ProfileDir string
	// KeepLogs keeps the replicas' log directory even when the run succeeds.
	KeepLogs bool
}

// The sources of Config.Source.
const (
	SourceFeed       = "feed"
	SourceKubernetes = "kubernetes"
)

// DefaultConfig returns a small, quick workload.
func DefaultConfig() Config {
	return Config{
		Source:            SourceFeed,
		ScaleShare:        0.2,
		CreateConcurrency: 16,
		Cluster:           gen.DefaultConfig(),
		Shards:            []int{1},
		Streams:           1000,
		StreamsPerConn:    100,
		NonOwner:          "forward",
		Churn:             100,
		Duration:          10 * time.Second,
		Settle:            30 * time.Second,
		ReadyTimeout:      10 * time.Minute,
	}
}

// MaxChurn bounds Config.Churn: a million changes a second is beyond what one harness can
// make, and the bound keeps the changes due in a run within an int64.
const MaxChurn = 1_000_000

// Validate reports what is wrong with c.
func (c Config) Validate() error {
	var errs []error
	if err := c.Cluster.Validate(); err != nil {
		errs = append(errs, err)
	}
	if len(c.Shards) == 0 {
		errs = append(errs, errors.New("no shard count to run"))
	}
	for _, n := range c.Shards {
		if n < 1 || n > 64 {
			errs = append(errs, fmt.Errorf("shard count %d outside 1..64", n))
		}
	}
	if c.Streams < 0 || c.Streams > 1_000_000 {
		errs = append(errs, fmt.Errorf("streams %d outside 0..1000000", c.Streams))
	}
	if c.StreamsPerConn < 1 {
		errs = append(errs, fmt.Errorf("streams per connection must be at least 1, got %d", c.StreamsPerConn))
	}
	if !(c.Churn >= 0 && c.Churn <= MaxChurn) { // and not NaN
		errs = append(errs, fmt.Errorf("churn %g outside 0..%d changes a second", c.Churn, MaxChurn))
	}
	if c.Duration < 0 || c.Settle <= 0 || c.ReadyTimeout <= 0 {
		errs = append(errs, errors.New("duration must not be negative; settle and ready timeout must be positive"))
	}
	if c.Storm < 0 || c.Storm > 100_000 {
		errs = append(errs, fmt.Errorf("storm %d outside 0..100000", c.Storm))
	}
	for _, d := range []time.Duration{c.StormAt, c.JoinAt, c.KillAt} {
		if d < 0 || d > c.Duration {
			errs = append(errs, fmt.Errorf("event at %s is outside the churn phase (0..%s)", d, c.Duration))
		}
	}
	if c.MaxKillConverge < 0 || (c.MaxKillConverge > 0 && c.KillAt == 0) {
		errs = append(errs, fmt.Errorf("max kill convergence %s: want a positive duration, with a kill (--kill-at)", c.MaxKillConverge))
	}
	if c.ReplicaCPUs < -1 {
		errs = append(errs, fmt.Errorf("replica CPUs %d: want -1 (Go's default), 0 (shared out) or a count", c.ReplicaCPUs))
	}
	if c.Source != SourceFeed && c.Source != SourceKubernetes {
		errs = append(errs, fmt.Errorf("source %s: want %s or %s", quote.String(c.Source), SourceFeed, SourceKubernetes))
	}
	if c.Source == SourceKubernetes && c.DeliverPods {
		errs = append(errs, errors.New("--deliver-pods is for the feed source"))
	}
	if c.Source != SourceKubernetes && c.KubePods {
		errs = append(errs, errors.New("--kube-pods is for the kubernetes source"))
	}
	if c.Source != SourceKubernetes && c.KubePolicy {
		errs = append(errs, errors.New("--kube-policy is for the kubernetes source"))
	}
	if !(c.ScaleShare >= 0 && c.ScaleShare <= 1) { // and not NaN
		errs = append(errs, fmt.Errorf("scale share %g outside 0..1", c.ScaleShare))
	}
	if c.CreateConcurrency < 1 || c.CreateConcurrency > 256 {
		errs = append(errs, fmt.Errorf("create concurrency %d outside 1..256", c.CreateConcurrency))
	}
	if c.NonOwner != "forward" && c.NonOwner != "redirect" {
		errs = append(errs, fmt.Errorf("non-owner mode %q: want forward or redirect", c.NonOwner))
	}
	if c.Binary == "" {
		errs = append(errs, errors.New("no meridian binary to run replicas with"))
	}
	return errors.Join(errs...)
}

// replicaProcs returns the GOMAXPROCS of each of n replicas on a machine of cpus CPUs (0:
// Go's default).
func (c Config) replicaProcs(n, cpus int) int {
	switch {
	case c.ReplicaCPUs > 0:
		return c.ReplicaCPUs
	case c.ReplicaCPUs < 0:
		return 0
	}
	return max(1, cpus/max(n, 1))
}
