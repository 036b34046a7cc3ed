// Package bench is Meridian's load harness (`meridian bench`): it generates a synthetic
// cluster (bench/gen), serves it over loopback to real destination replica processes
// (bench/feed) or, with Config.Source SourceKubernetes, creates it on a real kube-apiserver
// and etcd that it starts (internal/kubeenv) and runs the replicas with --source kubernetes,
// opens many real Get streams against them (receiving their messages undecoded and reading
// only the addresses from them, wire.ScanUpdate, so that its times and CPU are the replicas'
// and not its own decoding), applies churn (through the API server: slice updates,
// scale-ups and scale-downs), and measures propagation latency (HdrHistogram), first-batch
// latency under a storm of new streams (and the CPU each kind of process spent over the
// storm's span), per-replica heap, RSS and CPU, bytes received, coalescings, closed streams,
// and whether every stream's final set equals the truth. It writes a summary table, a JSON
// file and a self-contained HTML report.
//
// It owns the replica processes it starts (killed on return, on ctx cancellation, and by the
// kernel if the harness dies: Pdeathsig), the feed server or the API server and etcd (for
// all the runs of one Run), and every client goroutine; all of
// them are bounded in count and time and waited for. Everything listens on 127.0.0.1.
//
// It may import anything but cmd: it must not import `cmd/...`. Nothing imports it but cmd/meridian.
package bench
