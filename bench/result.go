package bench

import (
	"fmt"

	"github.com/meridian-mesh/meridian/bench/gen"
)

// Result is what one bench invocation measured: one Run per shard count.
type Result struct {
	// Source is where the replicas read the cluster: SourceFeed or SourceKubernetes.
	Source string `json:"source"`
	// ClusterCreateSeconds is, with SourceKubernetes, the time the harness took to create the
	// cluster's objects through the API server.
	ClusterCreateSeconds float64     `json:"cluster_create_seconds,omitempty"`
	Cluster              gen.Config  `json:"cluster"`
	Streams              int         `json:"streams"`
	StreamsPerConn       int         `json:"streams_per_conn"`
	ChurnPerSecond       float64     `json:"churn_per_second"`
	DurationS            float64     `json:"duration_seconds"`
	Storm                int         `json:"storm"`
	Runs                 []RunResult `json:"runs"`
}

// RunResult is what one configuration (a shard count) measured. The JSON names are documented in
// the README.
type RunResult struct {
	Shards int `json:"shards"`
	// NonOwner is the replicas' --non-owner mode (forward or redirect).
	NonOwner string `json:"non_owner"`
	// ReplicaGOMAXPROCS is each replica's GOMAXPROCS (0: Go's default, all CPUs).
	ReplicaGOMAXPROCS int `json:"replica_gomaxprocs"`
	// Propagation latency from the driver's change to its receipt by every stream of the
	// service, in milliseconds.
	P50Ms          float64 `json:"p50_ms"`
	P99Ms          float64 `json:"p99_ms"`
	P999Ms         float64 `json:"p999_ms"`
	MaxMs          float64 `json:"max_ms"`
	LatencySamples int64   `json:"latency_samples"`
	// LatencyMissed counts observations still outstanding at the end (a stream never saw the
	// change on its own; 0 when every stream ends right).
	LatencyMissed int64      `json:"latency_missed"`
	LatencyCDF    []CDFPoint `json:"latency_cdf,omitempty"`
	// LatencyBySecond is, for each second of the churn phase (by the time of the change),
	// how many samples it had, how many took over SlowMs, and the largest.
	LatencyBySecond []SecondLatency `json:"latency_by_second,omitempty"`
	// SlowSeconds counts the seconds with a sample over SlowMs.
	SlowSeconds int `json:"slow_seconds"`
	// Storm: time from opening each of the storm's streams to its first message.
	StormStreams int `json:"storm_streams"`
	// StormUnanswered counts the storm's streams that had no first message by the end of the
	// run; the percentiles are of the others.
	StormUnanswered int64   `json:"storm_unanswered"`
	StormP50Ms      float64 `json:"storm_first_batch_p50_ms"`
	StormP99Ms      float64 `json:"storm_first_batch_p99_ms"`
	StormMaxMs      float64 `json:"storm_first_batch_max_ms"`
	// StormGetP99Ms is the same for the storm's Get streams alone: their first Add, the
	// figure the scale-out issue names ("5,000 Gets at once, first Add p99"), while the
	// storm's GetProfile streams load the replicas beside them.
	StormGetP99Ms float64 `json:"storm_get_first_add_p99_ms"`
	// When every storm stream answered: the storm's span, from just before its first stream
	// opened to its last stream's first message; the CPU seconds the replicas, the harness,
	// and the API server with etcd spent over it (on everything they did meanwhile, the
	// churn and the streams already open too, not on the storm alone); and StormCPUShare,
	// their sum over what the machine's CPUs could give in the span. A share near 1 says the
	// storm was bound by this machine's CPUs (shared by every process of the run), not by
	// waiting. A replica killed or started during the storm is left out of the sum.
	StormSpanMs             float64 `json:"storm_span_ms,omitempty"`
	StormCPUSecondsReplicas float64 `json:"storm_cpu_seconds_replicas,omitempty"`
	StormCPUSecondsDriver   float64 `json:"storm_cpu_seconds_driver,omitempty"`
	StormCPUSecondsAPI      float64 `json:"storm_cpu_seconds_apiserver_etcd,omitempty"`
	StormCPUShare           float64 `json:"storm_cpu_share,omitempty"`
	SyncSeconds             float64 `json:"sync_seconds"`
	StreamsOpened           int     `json:"streams_opened"`
	// IdleHeapBytesPerShard is each replica's live heap, as the forced garbage collection
	// found it (go_gc_heap_live_bytes), once it was ready and before any stream was open.
	// IdleHeapAllocBytes is go_memstats_heap_alloc_bytes read just after, which these figures
	// were before (it adds what the heap profile and the scrape allocated since).
	IdleHeapBytesPerShard []uint64 `json:"idle_heap_bytes_per_shard"`
	IdleHeapAllocBytes    []uint64 `json:"idle_heap_alloc_bytes_per_shard,omitempty"`
	// With SourceKubernetes, the RSS of the API server and of etcd at the end of the run.
	APIServerRSSBytes uint64 `json:"apiserver_rss_bytes,omitempty"`
	EtcdRSSBytes      uint64 `json:"etcd_rss_bytes,omitempty"`
	// With SourceKubernetes, the API server's and etcd's CPU time during churn, and the API
	// server's own watch: the harness watches the EndpointSlices as the replicas do, and
	// measures from each write's answer to its watch event (from the change, when the event
	// came first, as propagation does). That is the API server's part of propagation, in the
	// same run; APIWatchMissed counts writes whose event it did not see.
	APIServerCPUSecondsChurn float64 `json:"apiserver_cpu_seconds_churn,omitempty"`
	EtcdCPUSecondsChurn      float64 `json:"etcd_cpu_seconds_churn,omitempty"`
	APIWatchP50Ms            float64 `json:"apiserver_watch_p50_ms,omitempty"`
	APIWatchP99Ms            float64 `json:"apiserver_watch_p99_ms,omitempty"`
	APIWatchMaxMs            float64 `json:"apiserver_watch_max_ms,omitempty"`
	APIWatchSamples          int64   `json:"apiserver_watch_samples,omitempty"`
	APIWatchMissed           int64   `json:"apiserver_watch_missed,omitempty"`
	APIWatchSlowSeconds      int     `json:"apiserver_watch_slow_seconds,omitempty"`
	// Per replica, after a forced garbage collection at the end of the run: the live heap
	// (as IdleHeapBytesPerShard) and go_memstats_heap_alloc_bytes (as IdleHeapAllocBytes).
	HeapBytesPerShard  []uint64  `json:"heap_bytes_per_shard"`
	HeapAllocBytes     []uint64  `json:"heap_alloc_bytes_per_shard,omitempty"`
	HeapInuseBytes     []uint64  `json:"heap_inuse_bytes_per_shard"`
	RSSBytesPerShard   []uint64  `json:"rss_bytes_per_shard"`
	CPUSecondsPerShard []float64 `json:"cpu_seconds_per_shard"`
	// RunqueueWaitSeconds is, per replica and over its life, the time its threads spent runnable but waiting
	// for a CPU (Linux schedstat); DriverRunqueueWaitSeconds the same for the harness. When it
	// dwarfs the CPU time, the host was oversubscribed and latency reflects that.
	RunqueueWaitSeconds       []float64 `json:"runqueue_wait_seconds_per_shard,omitempty"`
	DriverRunqueueWaitSeconds float64   `json:"driver_runqueue_wait_seconds,omitempty"`
	// CPUSecondsChurn is the replicas' CPU time during the churn phase, summed.
	CPUSecondsChurn float64 `json:"cpu_seconds_churn"`
	// DriverCPUSecondsChurn is the harness's own CPU time over the same phase (it shares the
	// machine with the replicas).
	DriverCPUSecondsChurn float64 `json:"driver_cpu_seconds_churn,omitempty"`
	// DriverGCCyclesChurn counts the harness's garbage collections from the start of churn
	// to the end of settling (it runs at GOGC=DriverGOGC).
	DriverGCCyclesChurn uint32 `json:"driver_gc_cycles_churn"`
	BytesReceived       int64  `json:"bytes_received"`
	UpdatesReceived     int64  `json:"updates_received"`
	ChangesApplied      int64  `json:"changes_applied"`
	// ChangesByKind counts the changes made by kind (replace, not-ready, ready, scale-up,
	// scale-down).
	ChangesByKind map[string]int64 `json:"changes_by_kind,omitempty"`
	// FinalStateMismatches counts Get streams whose final set differs from the truth.
	FinalStateMismatches int    `json:"final_state_mismatches"`
	Coalescings          uint64 `json:"coalescings"`
	// StreamsClosed counts streams that ended during the run (must be 0); streams on a
	// replica killed on purpose are counted in StreamsClosedByKill instead.
	StreamsClosed       int64 `json:"streams_closed"`
	StreamsClosedByKill int64 `json:"streams_closed_by_kill"`
	ApplyErrors         int64 `json:"apply_errors"`
	// Redirects counts streams that a replica refused naming the owner (--non-owner redirect)
	// and that the client reopened there.
	Redirects int64 `json:"redirects"`
	// From the replicas' sharding metrics, summed: ring changes applied (services gained or
	// lost), streams handed over between serving and relaying, streams relayed at the end.
	OwnershipChanges uint64 `json:"ownership_changes"`
	StreamHandovers  uint64 `json:"stream_handovers"`
	ForwardedStreams uint64 `json:"forwarded_streams"`
	// From the replicas' failure detectors (ring_failure_detector_events_total), summed:
	// probes of a peer that went unanswered, and suspicions that timed out, each a member
	// dropped from one replica's ring. Beyond a kill the run asked for, either is a flap's
	// cause: a replica too starved to answer its probes in time.
	Suspicions            uint64 `json:"suspicions"`
	MembersDeclaredFailed uint64 `json:"members_declared_failed"`
	// SlowSchedWaits sums the replicas' goroutine waits to run of over about 117 ms
	// (go_sched_latencies_seconds) since they started: how starved of CPU they were, which
	// is what makes them miss their probes.
	SlowSchedWaits uint64 `json:"slow_sched_waits"`
	// DeadHeld counts the peers the replicas found declared dead but still accepting
	// connections, which they kept in their rings for the hold (ring.Config.DeadHold);
	// DeadRevived, those that came back meanwhile: each a flap avoided.
	DeadHeld    uint64 `json:"dead_held"`
	DeadRevived uint64 `json:"dead_revived"`
	// PodGets and PodRecent sum the replicas' pods read one at a time because a slice started
	// naming a pod they had dropped (with --kube-pods: each new endpoint's pod exists before
	// its slice names it): with a GET, and from the copy their pod watch dropped lately.
	PodGets   uint64 `json:"pod_gets"`
	PodRecent uint64 `json:"pod_reads_recent"`
	// OwnedServicesPerShard is each replica's destination_owned_services at the end.
	OwnedServicesPerShard []uint64 `json:"owned_services_per_shard"`
	FeedResyncs           uint64   `json:"feed_resyncs"`
	Joined                bool     `json:"joined,omitempty"`
	Killed                bool     `json:"killed,omitempty"`
	// KillConvergeSeconds is, with a kill, the time from the kill until every Get stream
	// holds the truth again (no stream differs from it by a change older than 0.5s, and
	// none does for 2s after; an upper bound, to within 0.5s). KillUnconverged says the
	// streams had not converged by the end of settling; the figure is then the time watched.
	KillConvergeSeconds float64 `json:"kill_converge_seconds,omitempty"`
	KillUnconverged     bool    `json:"kill_unconverged,omitempty"`
	// DriverHeapBytes is the harness's own live heap after a GC at the end of the run (the
	// truth, every stream's view, gRPC buffers).
	DriverHeapBytes uint64  `json:"driver_heap_bytes"`
	SettleSeconds   float64 `json:"settle_seconds"`
}

// CDFPoint is one point of a latency distribution.
type CDFPoint struct {
	Ms       float64 `json:"ms"`
	Fraction float64 `json:"fraction"`
}

// HeapMean returns the mean heap per shard.
func (r RunResult) HeapMean() float64 { return meanU(r.HeapBytesPerShard) }

// HeapMax returns the largest heap of a shard.
func (r RunResult) HeapMax() float64 {
	m := 0.0
	for _, v := range r.HeapBytesPerShard {
		m = max(m, float64(v))
	}
	return m
}

func meanU(v []uint64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := 0.0
	for _, x := range v {
		s += float64(x)
	}
	return s / float64(len(v))
}

// Label names the configuration: "4 shard(s)", plus the mode when it is redirect.
func (r RunResult) Label() string {
	l := fmt.Sprintf("%d shard(s)", r.Shards)
	if r.NonOwner == "redirect" {
		l += " redirect"
	}
	return l
}

// SecondLatency is one second of RunResult.LatencyBySecond.
type SecondLatency struct {
	Second  int     `json:"second"`
	Samples int64   `json:"samples"`
	Slow    int64   `json:"slow"`
	MaxMs   float64 `json:"max_ms"`
}
