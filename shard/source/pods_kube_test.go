package source

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

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
	env := kubetest.Start(t)
	ns := env.Namespace(t, nil)
	ctx := apiCtx(t)
	create(t, ctx, env.Client, testService(ns, "a1"), testSlice(ns, "a1-s", "a1", "10.1.0.1"),
		testPod(ns, "p1"), testPod(ns, "p2"), testPod(ns, "p3"), testPod(ns, "p4"))
	setPodIP(t, env, ns, "p4", "10.9.0.4")

	reg := prometheus.NewRegistry()
	src := NewKubernetes(env.Client, KubernetesConfig{Namespace: ns}, reg, zaptest.NewLogger(t))
	rec := &podRecorder{filterRecorder: &filterRecorder{recorder: newRecorder()}, named: map[string]bool{}, ips: map[netip.Addr]bool{}}
	rec.set("a")
	rec.name(ns+"/p1", true)
	rec.address("10.9.0.4", true)
	testutil.Go(t, "Run", func(ctx context.Context) error { return src.Run(ctx, rec) })
	testutil.Eventually(t, apiTimeout, "informers to sync", src.Synced)

	podKey := func(name string) string { return KindPod + " " + ns + "/" + name }
	if got, want := src.podKeys(), []string{ns + "/p1", ns + "/p4"}; !slices.Equal(got, want) {
		t.Fatalf("pod cache holds %v, want %v (the named pod and the one with a wanted address)", got, want)
	}
	if rec.get(podKey("p2")) != nil || rec.get(podKey("p3")) != nil {
		t.Fatal("an unwanted pod was delivered")
	}

	// A change of an unwanted pod is neither delivered nor cached; a wanted pod's later
	// change arrives on the same watch, after it.
	relabelPod(t, env, ns, "p2", "v", "2")
	relabelPod(t, env, ns, "p1", "v", "2")
	testutil.Eventually(t, apiTimeout, "the wanted pod's update", func() bool {
		p, _ := rec.get(podKey("p1")).(*translator.Pod)
		return p != nil && p.Label("v") == "2"
	})
	if rec.get(podKey("p2")) != nil || src.Pod(ns, "p2") != nil {
		t.Fatal("an update of an unwanted pod was delivered or cached")
	}

	// Starting to need p2 (a slice names it) reads it; a pod that does not exist is counted
	// as gone.
	rec.name(ns+"/p2", true)
	src.WantPod(ns, "p2")
	rec.name(ns+"/ghost", true)
	src.WantPod(ns, "ghost")
	testutil.Eventually(t, apiTimeout, "p2 to be read and delivered", func() bool {
		p, _ := rec.get(podKey("p2")).(*translator.Pod)
		return p != nil && p.Label("v") == "2" && src.Pod(ns, "p2") == p
	})
	testutil.Eventually(t, apiTimeout, "the pod reads to be counted", func() bool {
		r := podReads(t, reg)
		return r["found"] == 1 && r["gone"] == 1 && r["failed"] == 0
	})

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
	relabelPod(t, env, ns, "p2", "v", "3")
	testutil.Eventually(t, apiTimeout, "the unwanted p2 to leave the cache", func() bool { return src.Pod(ns, "p2") == nil })
	testutil.Eventually(t, apiTimeout, "p2's deletion to be delivered", func() bool { return rec.get(podKey("p2")) == nil })
	if ev := rec.Take(); slices.Contains(ev, "+"+podKey("p2")) {
		t.Fatalf("the unwanted pod's change was delivered: %v", ev)
	}

	// Gain loads the pods wanted now that the cache lacks; Release drops those no longer
	// wanted (p4, whose address went elsewhere).
	rec.name(ns+"/p3", true)
	if err := src.Gain(ctx, Gained{Before: func(_, name string) bool { return strings.HasPrefix(name, "a") }}); err != nil {
		t.Fatal(err)
	}
	if p, _ := rec.get(podKey("p3")).(*translator.Pod); p == nil || src.Pod(ns, "p3") != p {
		t.Fatalf("Gain delivered %v and cached %v for p3, want the pod in both", p, src.Pod(ns, "p3"))
	}
	rec.address("10.9.0.4", false)
	src.Release()
	if got, want := src.podKeys(), []string{ns + "/p3"}; !slices.Equal(got, want) {
		t.Fatalf("after Release the pod cache holds %v, want %v", got, want)
	}

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
	before, err := env.Client.CoreV1().Pods(ns).Get(ctx, "p3", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	relabelPod(t, env, ns, "p3", "v", "4")
	testutil.Eventually(t, apiTimeout, "p3's change to be delivered", func() bool {
		p, _ := rec.get(podKey("p3")).(*translator.Pod)
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
	old, err := env.Client.CoreV1().Pods(ns).Get(ctx, "p3", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ps.beginLoad()
	if err := env.Client.CoreV1().Pods(ns).Delete(ctx, "p3", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, apiTimeout, "p3's deletion", func() bool { return rec.get(podKey("p3")) == nil })
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
}
