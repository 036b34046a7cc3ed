package source

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/meridian-mesh/meridian/internal/kubetest"
	"github.com/meridian-mesh/meridian/internal/testutil"
	"github.com/meridian-mesh/meridian/translator"
)

// podRecorder is a filterRecorder that needs some pods only (a PodFilter): those it names,
// and those with an address it names.
type podRecorder struct {
	*filterRecorder
	mu    sync.Mutex
	named map[string]bool
	ips   map[netip.Addr]bool
}

func (r *podRecorder) WantsPod(ns, name string, ips []netip.Addr) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.named[ns+"/"+name] || slices.ContainsFunc(ips, func(a netip.Addr) bool { return r.ips[a] })
}

func (r *podRecorder) name(key string, on bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.named[key] = on
}

func (r *podRecorder) address(a string, on bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ips[netip.MustParseAddr(a)] = on
}

func (k *Kubernetes) podKeys() []string {
	keys := k.podStore().ListKeys()
	slices.Sort(keys)
	return keys
}

// setPodIP gives pod ns/name the address ip, running.
func setPodIP(t *testing.T, env *kubetest.Env, ns, name, ip string) {
	t.Helper()
	ctx := apiCtx(t)
	p, err := env.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Status.Phase, p.Status.PodIP, p.Status.PodIPs = corev1.PodRunning, ip, []corev1.PodIP{{IP: ip}}
	if _, err := env.Client.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// relabelPod sets the label l=v on pod ns/name.
func relabelPod(t *testing.T, env *kubetest.Env, ns, name, l, v string) {
	t.Helper()
	ctx := apiCtx(t)
	p, err := env.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Labels[l] = v
	if _, err := env.Client.CoreV1().Pods(ns).Update(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func podReads(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	got := map[string]float64{}
	for _, m := range testutil.Gathered(t, reg, "destination_source_pod_reads_total") {
		got[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
	}
	return got
}

// TestPodShareKubernetes runs the source with a handler that needs some pods only, on a real
// API server: it caches and delivers only those; a pod it starts needing is read (WantPod),
// or loaded by Gain; one it stops needing leaves the cache (ForgetPod, a modification,
// Release); a pod deleted while it was read is not stored after its deletion; a pod a relist
// deleted (a tombstone) is read again while it is wanted.
func TestPodShareKubernetes(t *testing.T) {
	f := startPodShare(t)
	f.filtersBeforeTheCache()
	f.readsAndForgets()
	f.gainsAndReleases()
	f.racesWithTheInformer()
	f.recentCopies()
}

// podShareWorld is TestPodShareKubernetes's world: a source on a real API server whose handler
// (rec) needs some pods only, with the phases of the test as methods, run in order.
type podShareWorld struct {
	t   *testing.T
	env *kubetest.Env
	ns  string
	ctx context.Context
	reg *prometheus.Registry
	src *Kubernetes
	rec *podRecorder
}

// startPodShare creates Service a1 with a slice, pods p1-p4 (p4 with address 10.9.0.4),
// and runs the source with a handler that wants service a, pod p1 and address 10.9.0.4.
func startPodShare(t *testing.T) *podShareWorld {
	env := kubetest.Start(t)
	f := &podShareWorld{t: t, env: env, ns: env.Namespace(t, nil), ctx: apiCtx(t), reg: prometheus.NewRegistry()}
	ns := f.ns
	create(t, f.ctx, env.Client, testService(ns, "a1"), testSlice(ns, "a1-s", "a1", "10.1.0.1"),
		testPod(ns, "p1"), testPod(ns, "p2"), testPod(ns, "p3"), testPod(ns, "p4"))
	setPodIP(t, env, ns, "p4", "10.9.0.4")

	f.src = NewKubernetes(env.Client, KubernetesConfig{Namespace: ns}, f.reg, zaptest.NewLogger(t))
	f.rec = &podRecorder{filterRecorder: &filterRecorder{recorder: newRecorder()}, named: map[string]bool{}, ips: map[netip.Addr]bool{}}
	f.rec.set("a")
	f.rec.name(ns+"/p1", true)
	f.rec.address("10.9.0.4", true)
	testutil.Go(t, "Run", func(ctx context.Context) error { return f.src.Run(ctx, f.rec) })
	testutil.Eventually(t, apiTimeout, "informers to sync", f.src.Synced)
	return f
}

func (f *podShareWorld) podKey(name string) string { return KindPod + " " + f.ns + "/" + name }

// deliveredPod is the pod the handler holds as ns/name, or nil.
func (f *podShareWorld) deliveredPod(name string) *translator.Pod {
	p, _ := f.rec.get(f.podKey(name)).(*translator.Pod)
	return p
}

// filtersBeforeTheCache: only the wanted pods are cached and delivered, and a change of an
// unwanted pod is neither.
func (f *podShareWorld) filtersBeforeTheCache() {
	t, ns, src, rec := f.t, f.ns, f.src, f.rec
	if got, want := src.podKeys(), []string{ns + "/p1", ns + "/p4"}; !slices.Equal(got, want) {
		t.Fatalf("pod cache holds %v, want %v (the named pod and the one with a wanted address)", got, want)
	}
	if rec.get(f.podKey("p2")) != nil || rec.get(f.podKey("p3")) != nil {
		t.Fatal("an unwanted pod was delivered")
	}

	// A change of an unwanted pod is neither delivered nor cached; a wanted pod's later
	// change arrives on the same watch, after it.
	relabelPod(t, f.env, ns, "p2", "v", "2")
	relabelPod(t, f.env, ns, "p1", "v", "2")
	testutil.Eventually(t, apiTimeout, "the wanted pod's update", func() bool {
		p := f.deliveredPod("p1")
		return p != nil && p.Label("v") == "2"
	})
	if rec.get(f.podKey("p2")) != nil || src.Pod(ns, "p2") != nil {
		t.Fatal("an update of an unwanted pod was delivered or cached")
	}
}

// readsAndForgets: a pod the handler starts needing is read (WantPod): from the copy the
// watch dropped lately when there is one, else with a GET; one that does not exist is
// counted as gone, as is one deleted after the watch dropped it; ForgetPod drops an unwanted
// pod from the cache, and a cached pod the filter stops wanting leaves it at its next change,
// delivered as a deletion.
func (f *podShareWorld) readsAndForgets() {
	t, ns, src, rec := f.t, f.ns, f.src, f.rec
	// The watch dropped p2's change a moment ago (filtersBeforeTheCache): that copy is kept,
	// without a request.
	rec.name(ns+"/p2", true)
	src.WantPod(ns, "p2")
	rec.name(ns+"/ghost", true)
	src.WantPod(ns, "ghost")
	testutil.Eventually(t, apiTimeout, "p2 to be kept and delivered", func() bool {
		p := f.deliveredPod("p2")
		return p != nil && p.Label("v") == "2" && src.Pod(ns, "p2") == p
	})
	testutil.Eventually(t, apiTimeout, "the pod reads to be counted", func() bool {
		r := podReads(t, f.reg)
		return r["recent"] == 1 && r["found"] == 0 && r["gone"] == 1 && r["failed"] == 0
	})
	// A pod the watch dropped and then saw deleted is read, and is gone: the deletion let
	// the dropped copy go.
	create(t, f.ctx, f.env.Client, testPod(ns, "brief"))
	relabelPod(t, f.env, ns, "brief", "v", "2")
	if err := f.env.Client.CoreV1().Pods(ns).Delete(f.ctx, "brief", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	relabelPod(t, f.env, ns, "p1", "v", "3") // on the same watch, after the deletion
	testutil.Eventually(t, apiTimeout, "p1's update after brief's deletion", func() bool {
		p := f.deliveredPod("p1")
		return p != nil && p.Label("v") == "3"
	})
	rec.name(ns+"/brief", true)
	src.WantPod(ns, "brief")
	testutil.Eventually(t, apiTimeout, "the deleted pod to be read as gone", func() bool {
		r := podReads(t, f.reg)
		return r["gone"] == 2 && r["recent"] == 1
	})
	if src.Pod(ns, "brief") != nil || rec.get(f.podKey("brief")) != nil {
		t.Fatal("a pod deleted after the watch dropped it was kept")
	}
	rec.name(ns+"/brief", false)
	// A pod read as gone is not read again for a while: the index asks again for the pods
	// it misses every 30 s, and thousands that do not exist would keep the client's request
	// budget busy for good. (A pod created meanwhile arrives on the watch.)
	for range 3 {
		src.WantPod(ns, "ghost")
	}
	// p3 arrived with the informer's first list (client-go lists through the watch: its
	// initial events), and was dropped without a copy kept: it is read with a GET.
	if src.podFiltering().recent.holds(ns + "/p3") {
		t.Fatal("the pod watch's initial events were kept as recent drops")
	}
	rec.name(ns+"/p3", true)
	src.WantPod(ns, "p3") // read after the ghost's asks, in the queue's order
	testutil.Eventually(t, apiTimeout, "p3 to be read", func() bool { return src.Pod(ns, "p3") != nil })
	if r := podReads(t, f.reg); r["gone"] != 2 || r["found"] != 1 {
		t.Errorf("pods read: %v; want the pod that does not exist read once (and the deleted one), and p3 found with a GET", r)
	}
	rec.name(ns+"/p3", false)
	src.ForgetPod(ns, "p3")
	testutil.Eventually(t, apiTimeout, "p3 to be forgotten", func() bool { return src.Pod(ns, "p3") == nil })
	// The pod is created once no slice names it (its watch event is dropped as unwanted),
	// and named again: the watch showed it exists, so it is read at once, not in 5 minutes
	// (a StatefulSet's pod re-created under its name).
	rec.name(ns+"/ghost", false)
	src.ForgetPod(ns, "ghost")
	create(t, f.ctx, f.env.Client, testPod(ns, "ghost"))
	testutil.Eventually(t, apiTimeout, "the ghost's creation to be seen", func() bool { return !src.podFiltering().goneRecently(ns + "/ghost") })
	rec.name(ns+"/ghost", true)
	src.WantPod(ns, "ghost")
	testutil.Eventually(t, apiTimeout, "the created pod to be read", func() bool { return src.Pod(ns, "ghost") != nil })
	rec.name(ns+"/ghost", false)
	src.ForgetPod(ns, "ghost")
	rec.Take()

	// Forgetting p1 drops it from the cache; a wanted pod stays when forgotten.
	rec.name(ns+"/p1", false)
	src.ForgetPod(ns, "p1")
	src.ForgetPod(ns, "p2")
	if src.Pod(ns, "p1") != nil || src.Pod(ns, "p2") == nil {
		t.Fatalf("after ForgetPod the cache holds %v, want p2 and p4", src.podKeys())
	}

	// A cached pod the filter stops wanting leaves the cache at its next change, and the
	// handler is told that it is gone (it may hold its addresses), not that it changed.
	rec.Take()
	rec.name(ns+"/p2", false)
	relabelPod(t, f.env, ns, "p2", "v", "3")
	testutil.Eventually(t, apiTimeout, "the unwanted p2 to leave the cache", func() bool { return src.Pod(ns, "p2") == nil })
	testutil.Eventually(t, apiTimeout, "p2's deletion to be delivered", func() bool { return rec.get(f.podKey("p2")) == nil })
	if ev := rec.Take(); slices.Contains(ev, "+"+f.podKey("p2")) {
		t.Fatalf("the unwanted pod's change was delivered: %v", ev)
	}
}

// gainsAndReleases: Gain loads the pods wanted now that the cache lacks; Release drops those
// no longer wanted (p4, whose address went elsewhere).
func (f *podShareWorld) gainsAndReleases() {
	t, ns, src, rec := f.t, f.ns, f.src, f.rec
	rec.name(ns+"/p3", true)
	if err := src.Gain(f.ctx, Gained{Before: func(_, name string) bool { return strings.HasPrefix(name, "a") }}); err != nil {
		t.Fatal(err)
	}
	if p := f.deliveredPod("p3"); p == nil || src.Pod(ns, "p3") != p {
		t.Fatalf("Gain delivered %v and cached %v for p3, want the pod in both", p, src.Pod(ns, "p3"))
	}
	rec.address("10.9.0.4", false)
	src.Release()
	if got, want := src.podKeys(), []string{ns + "/p3"}; !slices.Equal(got, want) {
		t.Fatalf("after Release the pod cache holds %v, want %v", got, want)
	}
}

// racesWithTheInformer: a tombstone of a wanted pod is read again, a stale read stored over
// the informer's newer copy is mended at its delivery, and a read never stores a pod after
// the watch deleted it.
func (f *podShareWorld) racesWithTheInformer() {
	t, ns, src, rec, ctx := f.t, f.ns, f.src, f.rec, f.ctx
	ps := src.podFiltering()

	// A relist deleted p3 (a tombstone), which is still wanted: it is read again, also while
	// another read is in progress (which records the deletions it must not undo: a tombstone's
	// pod may exist).
	p3 := src.Pod(ns, "p3")
	_ = src.podStore().Delete(p3)
	handler := ps.handler(eventHandler(src, nil, ps.onPod(rec)), rec)
	ps.beginLoad()
	handler.DeleteFunc(cache.DeletedFinalStateUnknown{Key: ns + "/p3", Obj: p3})
	testutil.Eventually(t, apiTimeout, "p3 to be read again after the tombstone", func() bool { return src.Pod(ns, "p3") != nil })
	ps.endLoad()

	// A read of p3 that checked the cache just before the informer stored a newer copy, and
	// stored its older one after it (keep's check and add are not atomic with the informer's
	// writes): the informer's delivery of the newer copy puts it back in the cache.
	before, err := f.env.Client.CoreV1().Pods(ns).Get(ctx, "p3", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	relabelPod(t, f.env, ns, "p3", "v", "4")
	testutil.Eventually(t, apiTimeout, "p3's change to be delivered", func() bool {
		p := f.deliveredPod("p3")
		return p != nil && p.Label("v") == "4"
	})
	fresh := src.Pod(ns, "p3")
	staleCopy, _ := slimObject(before)
	_ = src.podStore().Update(staleCopy) // keep's add, landing after the informer's
	handler.UpdateFunc(staleCopy, fresh) // the informer's delivery of what it stored
	if got := src.Pod(ns, "p3"); got != fresh {
		t.Fatalf("after the informer's delivery the cache holds p3 with v=%q, want its newer copy (v=4)", got.Label("v"))
	}

	// p3 read before its deletion, stored after the watch deleted it: not stored. And a read
	// stored between the informer's removal and the handler's call is undone by the call.
	old, err := f.env.Client.CoreV1().Pods(ns).Get(ctx, "p3", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ps.beginLoad()
	if err := f.env.Client.CoreV1().Pods(ns).Delete(ctx, "p3", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, apiTimeout, "p3's deletion", func() bool { return rec.get(f.podKey("p3")) == nil })
	ps.keep(old)
	ps.endLoad()
	if src.Pod(ns, "p3") != nil {
		t.Fatal("a pod read before its deletion was stored after it")
	}
	ps.keep(old) // no read in progress recorded the deletion: stored, as a read racing the informer would
	stale := src.Pod(ns, "p3")
	if stale == nil {
		t.Fatal("keep stored nothing")
	}
	src.deliverMu.Lock()
	ps.onDelete(stale)
	src.deliverMu.Unlock()
	if src.Pod(ns, "p3") != nil {
		t.Fatal("the handler's deletion did not undo a read stored after the informer's")
	}

	// p1 (no longer wanted since ForgetPod, still held by the handler) passed by the watch
	// while it was wanted and stored by the informer after the filter stopped wanting it:
	// its delivery removes it from the cache and tells the handler it is gone.
	p1, err := f.env.Client.CoreV1().Pods(ns).Get(ctx, "p1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rec.get(f.podKey("p1")) == nil {
		t.Fatal("the handler does not hold p1")
	}
	late, _ := slimObject(p1)
	_ = src.podStore().Add(late)
	handler.AddFunc(late)
	if src.Pod(ns, "p1") != nil || rec.get(f.podKey("p1")) != nil {
		t.Fatalf("an unwanted pod the informer stored late: cached %v, delivered %v; want neither", src.Pod(ns, "p1") != nil, rec.get(f.podKey("p1")) != nil)
	}
}

// recentCopies: a copy taken from the drops while reading, whose pod the watch deletes before
// it is stored, is not stored, as a GET's would not be; and a list, and a watch that lists
// first, let go of what the watch dropped before (events may have been missed meanwhile),
// while a watch that resumes does not.
func (f *podShareWorld) recentCopies() {
	t, ns, src, rec, ctx := f.t, f.ns, f.src, f.rec, f.ctx
	ps := src.podFiltering()

	// A read takes the copy of "gone2" (an unwanted pod the watch dropped), the watch
	// deletes the pod, then the read stores the copy: not stored.
	create(t, ctx, f.env.Client, testPod(ns, "gone2"))
	key := ns + "/gone2"
	testutil.Eventually(t, apiTimeout, "gone2's creation to be dropped", func() bool { return ps.recent.holds(key) })
	ps.beginLoad()
	p := ps.recent.take(key, time.Now())
	if err := f.env.Client.CoreV1().Pods(ns).Delete(ctx, "gone2", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, apiTimeout, "gone2's deletion to be delivered", func() bool {
		ps.mu.Lock()
		defer ps.mu.Unlock()
		_, ok := ps.deleted[key]
		return ok
	})
	rec.name(key, true)
	ps.keepSlim(p)
	ps.endLoad()
	if src.Pod(ns, "gone2") != nil || rec.get(f.podKey("gone2")) != nil {
		t.Fatal("a copy taken before its pod's deletion was stored after it")
	}
	rec.name(key, false)

	// Last: the list and watches below stand for the reflector's next ones, which replace
	// the informer's watch (its drops are no longer kept after them).
	lw, ok := ps.listWatch().(*cache.ListWatch)
	if !ok {
		t.Fatalf("listWatch is a %T", ps.listWatch())
	}
	hold := func() {
		ps.recent.put(translator.SlimPod(testPod(ns, "x")), time.Now(), ps.recent.generation())
	}
	hold()
	l, err := lw.ListWithContext(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ps.recent.holds(ns + "/x") {
		t.Fatal("a list kept the drops from before it")
	}
	hold()
	w, err := lw.WatchWithContext(ctx, metav1.ListOptions{ResourceVersion: l.(*corev1.PodList).ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	w.Stop()
	if !ps.recent.holds(ns + "/x") {
		t.Fatal("a watch that resumes let the drops go")
	}
	w, err = lw.WatchWithContext(ctx, metav1.ListOptions{SendInitialEvents: ptr.To(true), AllowWatchBookmarks: true,
		ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan})
	if err != nil {
		t.Fatal(err)
	}
	w.Stop()
	if ps.recent.holds(ns + "/x") {
		t.Fatal("a watch that lists first kept the drops from before it")
	}
}
