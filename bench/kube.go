package bench

import (
	"context"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/meridian-mesh/meridian/bench/gen"
	"github.com/meridian-mesh/meridian/bench/internal/schedstat"
	"github.com/meridian-mesh/meridian/deploy/charts"
	"github.com/meridian-mesh/meridian/internal/kubeenv"
)

// kubeServiceCIDR is the API server's service range: the generated Services' cluster IPs
// (IPv6, for the feed) are left for it to allocate, from a range clear of the pods'
// 10.0.0.0/8.
const kubeServiceCIDR = "172.16.0.0/12"

// kubeWorld is a real kube-apiserver and etcd (internal/kubeenv) holding the synthetic
// cluster, created and changed through client-go; replicas read it with --source
// kubernetes. It serves every run of a Run.
type kubeWorld struct {
	env        *kubeenv.Env
	client     kubernetes.Interface
	dir        string // the kubeconfig's
	kubeconfig string
	cfg        Config
	// createSeconds is the time the cluster's creation took.
	createSeconds float64

	mu      sync.Mutex // guards cluster; held from a change to its request's start
	cluster *gen.Cluster
	writes  *sliceWriter
	// writer is the churn's client: protobuf, as the EndpointSlice controller's.
	writer kubernetes.Interface
	// watch is the harness's own watch of the slices (the API server's part of propagation).
	watch *apiWatch
	// cpuAtChurn is the API server's and etcd's CPU seconds when the churn began.
	cpuAtChurn [2]float64
}

// startKubeWorld starts the API server (with the chart's CRDs), writes a kubeconfig for the
// replicas and creates cfg's cluster. On error it has stopped what it started.
func startKubeWorld(ctx context.Context, cfg Config, log *zap.Logger) (_ *kubeWorld, err error) {
	cluster, err := gen.NewCluster(cfg.Cluster)
	if err != nil {
		return nil, err
	}
	crds, err := fs.Sub(charts.Meridian(), "crds")
	if err != nil {
		return nil, err
	}
	ph := newPhase(cfg, -1, "starting kube-apiserver and etcd", "")
	env, err := kubeenv.Start(ctx, kubeenv.Config{AssetsDir: cfg.KubeAssets, ServiceCIDRs: kubeServiceCIDR, CRDs: crds})
	ph.done()
	if err != nil {
		return nil, err
	}
	w := &kubeWorld{env: env, cfg: cfg, cluster: cluster}
	w.writes = newSliceWriter(w)
	defer func() {
		if err != nil {
			w.stop(log)
		}
	}()
	if w.dir, err = os.MkdirTemp("", "meridian-bench-kube-"); err != nil {
		return nil, err
	}
	w.kubeconfig = filepath.Join(w.dir, "kubeconfig")
	if err := env.WriteKubeconfig(w.kubeconfig); err != nil {
		return nil, fmt.Errorf("write the replicas' kubeconfig: %w", err)
	}
	rc := rest.CopyConfig(env.Config)
	rc.QPS, rc.Burst = 10000, 20000 // the harness stands in for every controller of a cluster
	if w.client, err = kubernetes.NewForConfig(rc); err != nil {
		return nil, err
	}
	start := time.Now()
	if err := w.create(ctx); err != nil {
		return nil, fmt.Errorf("create the cluster: %w", err)
	}
	w.createSeconds = time.Since(start).Seconds()
	log.Info("created the cluster", zap.Float64("seconds", w.createSeconds))
	pc := rest.CopyConfig(rc)
	pc.ContentType = "application/vnd.kubernetes.protobuf" // as controllers write and replicas read slices
	if w.writer, err = kubernetes.NewForConfig(pc); err != nil {
		return nil, err
	}
	if w.watch, err = startAPIWatch(ctx, w.writer, log); err != nil {
		return nil, err
	}
	return w, nil
}

// stop ends the slice writer and the watch, stops the API server and etcd and removes the kubeconfig.
func (w *kubeWorld) stop(log *zap.Logger) {
	w.writes.stop()
	if w.watch != nil {
		w.watch.stop()
	}
	if err := w.env.Stop(); err != nil {
		log.Warn("stop the API server", zap.Error(err))
	}
	if w.dir != "" {
		os.RemoveAll(w.dir)
	}
}

// create creates the namespaces, then every Service and EndpointSlice, at most
// cfg.CreateConcurrency requests at a time.
func (w *kubeWorld) create(ctx context.Context) error {
	c := w.cfg.Cluster
	var nsJobs []func(context.Context) error
	for i := range c.Namespaces {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: c.Namespace(i)}}
		nsJobs = append(nsJobs, func(ctx context.Context) error {
			_, err := w.client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
			return err
		})
	}
	if err := w.runBounded(ctx, "creating namespaces", nsJobs); err != nil {
		return err
	}
	if w.cfg.KubePolicy {
		if err := w.createPolicy(ctx); err != nil {
			return err
		}
	}
	var jobs []func(context.Context) error
	for i := range w.cluster.Services() {
		jobs = append(jobs, func(ctx context.Context) error {
			svc := c.Service(i)
			// The API server allocates cluster IPs from its own range.
			svc.Spec.ClusterIP, svc.Spec.ClusterIPs = "", nil
			_, err := w.client.CoreV1().Services(svc.Namespace).Create(ctx, svc, metav1.CreateOptions{})
			return err
		})
		for k := range w.cluster.Slices(i) {
			sl := w.slice(i, k)
			if w.cfg.KubePods {
				for _, e := range w.cluster.Endpoints(i, k) {
					jobs = append(jobs, func(ctx context.Context) error { return w.createPod(ctx, i, e.Serial) })
				}
			}
			jobs = append(jobs, func(ctx context.Context) error {
				_, err := w.client.DiscoveryV1().EndpointSlices(sl.Namespace).Create(ctx, sl, metav1.CreateOptions{})
				return err
			})
		}
	}
	return w.runBounded(ctx, "creating services, slices and pods", jobs)
}

// slice synthesizes slice k of service i as the API server holds it: without Pods
// (cfg.KubePods off), its endpoints have no targetRef, since an endpoint naming a Pod that
// does not exist is not served (as in Linkerd).
func (w *kubeWorld) slice(i, k int) *discoveryv1.EndpointSlice {
	sl := w.cluster.EndpointSlice(i, k)
	if !w.cfg.KubePods {
		for j := range sl.Endpoints {
			sl.Endpoints[j].TargetRef = nil
		}
	}
	return sl
}

// createPod creates the running pod of serial s behind service i: the Pod, then its status
// (phase, IP), which a create ignores.
func (w *kubeWorld) createPod(ctx context.Context, i int, s uint32) error {
	c := w.cfg.Cluster
	ns := c.Namespace(i)
	pod := gen.Pod(c, ns, c.PodName(i, s))
	if pod == nil {
		return fmt.Errorf("no pod of serial %d", s)
	}
	status := pod.Status
	// What validation asks of a Pod that gen leaves out (no garbage collector runs, so the
	// owner need not exist).
	for j := range pod.OwnerReferences {
		pod.OwnerReferences[j].UID = types.UID("bench-" + pod.OwnerReferences[j].Name)
	}
	for j := range pod.Spec.Containers {
		pod.Spec.Containers[j].Image = "bench.invalid/app"
	}
	pods := w.client.CoreV1().Pods(ns)
	got, err := pods.Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create pod %s/%s: %w", ns, pod.Name, err)
	}
	got.Status = status
	if _, err := pods.UpdateStatus(ctx, got, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("set the status of pod %s/%s: %w", ns, pod.Name, err)
	}
	return nil
}

// runBounded runs jobs on cfg.CreateConcurrency goroutines (waited for) and returns the
// first error, after which no more jobs start.
func (w *kubeWorld) runBounded(ctx context.Context, desc string, jobs []func(context.Context) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ph := newPhase(w.cfg, int64(len(jobs)), desc, "objects")
	var (
		next, done atomic.Int64
		once       sync.Once
		first      error
		wg         sync.WaitGroup
	)
	for range min(w.cfg.CreateConcurrency, len(jobs)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := next.Add(1) - 1; j < int64(len(jobs)) && ctx.Err() == nil; j = next.Add(1) - 1 {
				if err := jobs[j](ctx); err != nil {
					once.Do(func() { first = err; cancel() })
					return
				}
				done.Add(1)
			}
		}()
	}
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	for {
		select {
		case <-finished:
			ph.set(done.Load())
			ph.done()
			if first == nil && ctx.Err() != nil {
				first = ctx.Err()
			}
			return first
		case <-tick.C:
			ph.set(done.Load())
		}
	}
}

func (w *kubeWorld) source(s *ReplicaSpec) { s.Kubeconfig = w.kubeconfig }

// apply makes one change to the truth (an endpoint's readiness flipped or the endpoint
// replaced, or, cfg.ScaleShare of the time, a scale-up or scale-down of the slice), calls pre,
// and queues the changed slice for the API server (see sliceWriter), whose answer calls post.
// Only churn's goroutine calls it.
func (w *kubeWorld) apply(ctx context.Context, rng *rand.Rand, busy func(uint32) bool, pre, post func(gen.Change, time.Time)) error {
	w.mu.Lock()
	var ch gen.Change
	var err error
	switch x := rng.Float64(); {
	case x < w.cfg.ScaleShare/2:
		ch, err = w.cluster.Scale(rng, busy, true)
	case x < w.cfg.ScaleShare:
		ch, err = w.cluster.Scale(rng, busy, false)
	default:
		ch, err = w.cluster.Apply(rng, busy)
	}
	if err != nil {
		w.mu.Unlock()
		return err
	}
	sl := w.slice(ch.Service, ch.Slice)
	w.mu.Unlock()
	// Only this goroutine changes the truth, and busy reads what pre records: recording the
	// change after the lock is released loses nothing.
	at := time.Now()
	pre(ch, at)
	return w.writes.enqueue(writeJob{ctx: ctx, ch: ch, at: at, slice: sl, post: post})
}

// flush waits for the writes in flight.
func (w *kubeWorld) flush() error { return w.writes.flush() }

func (w *kubeWorld) read(fn func(*gen.Cluster)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	fn(w.cluster)
}

func (w *kubeWorld) resyncs() uint64 { return 0 }

func (w *kubeWorld) pids() (api, etcd int) { return w.env.PIDs() }

// beginChurn reads the API server's and etcd's CPU time and starts the watch's figures anew.
func (w *kubeWorld) beginChurn(start time.Time) {
	api, etcd := w.env.PIDs()
	w.cpuAtChurn[0], _ = schedstat.CPUSeconds(api)
	w.cpuAtChurn[1], _ = schedstat.CPUSeconds(etcd)
	w.watch.begin(start)
}

// measure reads the API server's and etcd's RSS and their CPU time since the churn began,
// and the watch's figures.
func (w *kubeWorld) measure(res *RunResult) {
	api, etcd := w.env.PIDs()
	res.APIServerRSSBytes, _ = rssBytes(api)
	res.EtcdRSSBytes, _ = rssBytes(etcd)
	if c, err := schedstat.CPUSeconds(api); err == nil {
		res.APIServerCPUSecondsChurn = c - w.cpuAtChurn[0]
	}
	if c, err := schedstat.CPUSeconds(etcd); err == nil {
		res.EtcdCPUSecondsChurn = c - w.cpuAtChurn[1]
	}
	w.watch.fill(res)
}
