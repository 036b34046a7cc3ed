package source

import (
	"context"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meridian-mesh/meridian/internal/kubetest"
	"github.com/meridian-mesh/meridian/internal/testutil"
	"github.com/meridian-mesh/meridian/translator"
)

// filterRecorder is a recorder that wants the services whose names start with one of its
// prefixes (a ServiceFilter), and counts the times it is asked.
type filterRecorder struct {
	*recorder
	prefixes atomic.Pointer[[]string]
}

func (r *filterRecorder) set(p ...string) { r.prefixes.Store(&p) }

func (r *filterRecorder) WantsService(_, name string) bool {
	for _, p := range *r.prefixes.Load() {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

func startFiltered(t *testing.T, env *kubetest.Env, ns string, prefixes ...string) (*Kubernetes, *filterRecorder) {
	t.Helper()
	src := NewKubernetes(env.Client, KubernetesConfig{Namespace: ns}, prometheus.NewRegistry(), zaptest.NewLogger(t))
	rec := &filterRecorder{recorder: newRecorder()}
	rec.set(prefixes...)
	testutil.Go(t, "Run", func(ctx context.Context) error { return src.Run(ctx, rec) })
	testutil.Eventually(t, apiTimeout, "informers to sync", src.Synced)
	return src, rec
}

func (k *Kubernetes) storeKeys(kind string) []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, s := range k.shares {
		if s.lw.kind.kind == kind {
			keys := s.informer.GetStore().ListKeys()
			slices.Sort(keys)
			return keys
		}
	}
	return nil
}

func (k *Kubernetes) stored(kind, key string) any {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, s := range k.shares {
		if s.lw.kind.kind == kind {
			o, _, _ := s.informer.GetStore().GetByKey(key)
			return o
		}
	}
	return nil
}

// checkStoredIPs fails t unless the Services cache keeps of the Service key (one the handler
// does not want) its compact form, with the cluster IP ip ("": any).
func checkStoredIPs(t *testing.T, src *Kubernetes, key, ip string) {
	t.Helper()
	c, ok := src.stored("Service", key).(*serviceIPs)
	if !ok || c.clusterIP == "" || (ip != "" && c.clusterIP != ip) || c.namespace+"/"+c.name != key || c.resourceVersion == "" {
		t.Fatalf("service cache holds %#v for %s, want its cluster IPs only (serviceIPs)", src.stored("Service", key), key)
	}
}

// twoServices starts the API server and creates, in a new namespace, the Services a1 and b1
// with a slice each (a1-s, b1-s).
func twoServices(t *testing.T) (*kubetest.Env, string, context.Context) {
	t.Helper()
	env := kubetest.Start(t)
	ns := env.Namespace(t, nil)
	ctx := apiCtx(t)
	create(t, ctx, env.Client, testService(ns, "a1"), testService(ns, "b1"),
		testSlice(ns, "a1-s", "a1", "10.1.0.1"), testSlice(ns, "b1-s", "b1", "10.2.0.1"))
	return env, ns, ctx
}

// TestShareFilterKubernetes runs the source with a handler that wants some services only,
// on a real API server: the slices of the others are never delivered nor cached, their
// Services arrive as cluster IPs only, Gain loads a gained share whole (with what changed
// while it was not wanted), and Release lets the caches drop what is no longer wanted.
func TestShareFilterKubernetes(t *testing.T) {
	env, ns, ctx := twoServices(t)
	src, rec := startFiltered(t, env, ns, "a")

	keyA, keyB := KindEndpointSlice+" "+ns+"/a1-s", KindEndpointSlice+" "+ns+"/b1-s"
	if rec.get(keyA) == nil {
		t.Fatal("the wanted slice was not delivered")
	}
	if rec.get(keyB) != nil {
		t.Fatal("the unwanted slice was delivered")
	}
	if got := src.storeKeys("EndpointSlice"); !slices.Equal(got, []string{ns + "/a1-s"}) {
		t.Fatalf("slice cache holds %v, want the wanted slice only", got)
	}
	b := rec.get(KindService + " " + ns + "/b1").(*corev1.Service)
	if !IsClusterIPsOnly(b) || b.Spec.ClusterIP == "" || len(b.Spec.Ports) != 0 {
		t.Fatalf("unwanted Service delivered as %+v, want its cluster IPs only", b)
	}
	if a := rec.get(KindService + " " + ns + "/a1").(*corev1.Service); IsClusterIPsOnly(a) || len(a.Spec.Ports) != 1 {
		t.Fatalf("wanted Service delivered as %+v", a)
	}
	checkStoredIPs(t, src, ns+"/b1", b.Spec.ClusterIP)

	// Changes of the unwanted slice are not delivered: the wanted slice's later change
	// arrives on the same watch, after them.
	updateSlice(t, env, ns, "b1-s", "10.2.0.1", "10.2.0.2")
	updateSlice(t, env, ns, "a1-s", "10.1.0.1", "10.1.0.2")
	testutil.Eventually(t, apiTimeout, "the wanted slice's update", func() bool {
		es, _ := rec.get(keyA).(*translator.EndpointSlice)
		return es != nil && len(es.Endpoints) == 2
	})
	if rec.get(keyB) != nil || src.stored("EndpointSlice", ns+"/b1-s") != nil {
		t.Fatal("an update of the unwanted slice was delivered or cached")
	}

	// Gain b: the change made while it was not wanted arrives with it.
	rec.set("a", "b")
	if err := src.Gain(ctx, Gained{Before: func(_, name string) bool { return strings.HasPrefix(name, "a") }}); err != nil {
		t.Fatal(err)
	}
	if es, _ := rec.get(keyB).(*translator.EndpointSlice); es == nil || len(es.Endpoints) != 2 {
		t.Fatalf("Gain delivered %v, want the gained slice with 2 endpoints", es)
	}
	if b := rec.get(KindService + " " + ns + "/b1").(*corev1.Service); IsClusterIPsOnly(b) || len(b.Spec.Ports) != 1 {
		t.Fatalf("Gain delivered the Service as %+v, want it whole", b)
	}

	// Lose a: Release drops its slice from the cache and reduces its Service there; its
	// changes and its deletion are no longer delivered, but as the placeholder of its own
	// service (IsPlaceholder: a handler that holds it there ignores it).
	rec.set("b")
	src.Release()
	if got := src.storeKeys("EndpointSlice"); slices.Contains(got, ns+"/a1-s") {
		t.Fatalf("slice cache still holds the lost slice: %v", got)
	}
	checkStoredIPs(t, src, ns+"/a1", "")
	rec.Take()
	updateSlice(t, env, ns, "a1-s", "10.1.0.9")
	if err := env.Client.DiscoveryV1().EndpointSlices(ns).Delete(ctx, "a1-s", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	updateSlice(t, env, ns, "b1-s", "10.2.0.3")
	testutil.Eventually(t, apiTimeout, "the wanted slice's update", func() bool {
		es, _ := rec.get(keyB).(*translator.EndpointSlice)
		return es != nil && len(es.Endpoints) == 1
	})
	ev := rec.Take()
	if slices.Contains(ev, "+"+keyA) {
		t.Fatalf("a change of the lost slice was delivered: %v", ev)
	}
	if es, _ := rec.deletedAs(keyA).(*translator.EndpointSlice); slices.Contains(ev, "-"+keyA) && (!IsPlaceholder(es) || es.Service != "a1") {
		t.Fatalf("the lost slice's deletion was delivered as %+v, want the placeholder of a1", es)
	}

	// The lost Service, kept as serviceIPs, is delivered reduced when it changes and when it
	// is deleted, and leaves the cache.
	keySvc := KindService + " " + ns + "/a1"
	svc, err := env.Client.CoreV1().Services(ns).Get(ctx, "a1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	svc.Labels = map[string]string{"changed": "yes"}
	if svc, err = env.Client.CoreV1().Services(ns).Update(ctx, svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, apiTimeout, "the lost Service's update", func() bool {
		a, _ := rec.get(keySvc).(*corev1.Service)
		return a != nil && a.ResourceVersion == svc.ResourceVersion
	})
	if a := rec.get(keySvc).(*corev1.Service); !IsClusterIPsOnly(a) || a.Spec.ClusterIP != svc.Spec.ClusterIP {
		t.Fatalf("the lost Service's update was delivered as %+v, want its cluster IPs only", a)
	}
	checkStoredIPs(t, src, ns+"/a1", svc.Spec.ClusterIP)
	if err := env.Client.CoreV1().Services(ns).Delete(ctx, "a1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, apiTimeout, "the lost Service's deletion", func() bool { return rec.deletedAs(keySvc) != nil })
	if a, _ := rec.deletedAs(keySvc).(*corev1.Service); a == nil || !IsClusterIPsOnly(a) || a.Spec.ClusterIP != svc.Spec.ClusterIP {
		t.Fatalf("the lost Service's deletion was delivered as %+v, want its cluster IPs only", rec.deletedAs(keySvc))
	}
	if o := src.stored("Service", ns+"/a1"); o != nil {
		t.Fatalf("service cache still holds %#v for the deleted Service", o)
	}
}

func updateSlice(t *testing.T, env *kubetest.Env, ns, name string, addrs ...string) {
	t.Helper()
	modifySlice(t, env, ns, name, func(es *discoveryv1.EndpointSlice) { es.Endpoints = testSlice(ns, name, "", addrs...).Endpoints })
}

// modifySlice updates the slice ns/name as modify changes it.
func modifySlice(t *testing.T, env *kubetest.Env, ns, name string, modify func(*discoveryv1.EndpointSlice)) {
	t.Helper()
	ctx := apiCtx(t)
	es, err := env.Client.DiscoveryV1().EndpointSlices(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	modify(es)
	if _, err := env.Client.DiscoveryV1().EndpointSlices(ns).Update(ctx, es, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// lostDuringList is a ServiceFilter whose share shrinks while the first list is read: it
// admits every service the first time it is asked about it (when the list page is decoded),
// and from then on only those that start with keep, as if the ring changed between the page
// and the informer's store.
type lostDuringList struct {
	*recorder
	keep  string
	mu    sync.Mutex
	asked map[string]bool
}

func (r *lostDuringList) WantsService(ns, name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.asked[ns+"/"+name] {
		r.asked[ns+"/"+name] = true
		return true
	}
	return strings.HasPrefix(name, r.keep)
}

// TestShareLostDuringList: objects decoded in full under the old share, which reach the
// informer after the share moved away, are not cached in full nor delivered. The slice of the
// lost service never reaches the handler and leaves the cache, and its Service is cached and
// delivered as cluster IPs only, as if the list had been read under the new share.
func TestShareLostDuringList(t *testing.T) {
	env, ns, _ := twoServices(t)
	reg := prometheus.NewRegistry()
	src := NewKubernetes(env.Client, KubernetesConfig{Namespace: ns}, reg, zaptest.NewLogger(t))
	rec := &lostDuringList{recorder: newRecorder(), keep: "b", asked: map[string]bool{}}
	testutil.Go(t, "Run", func(ctx context.Context) error { return src.Run(ctx, rec) })
	testutil.Eventually(t, apiTimeout, "informers to sync", src.Synced)
	// Eventually: the first list asks for resourceVersion 0, which the API server answers
	// from its watch cache, and that may not hold yet what the test created just before (the
	// watch brings it then). It failed so once, on a loaded machine.
	testutil.Eventually(t, apiTimeout, "the kept slice delivered", func() bool { return rec.get(KindEndpointSlice+" "+ns+"/b1-s") != nil })
	if got := rec.get(KindEndpointSlice + " " + ns + "/a1-s"); got != nil {
		t.Fatalf("the slice of the service lost during the list was delivered: %+v", got)
	}
	testutil.Eventually(t, apiTimeout, "the slice cache to hold the kept slice only", func() bool {
		return slices.Equal(src.storeKeys("EndpointSlice"), []string{ns + "/b1-s"})
	})
	checkStoredIPs(t, src, ns+"/a1", "")
	if a, _ := rec.get(KindService + " " + ns + "/a1").(*corev1.Service); a == nil || !IsClusterIPsOnly(a) {
		t.Fatalf("the lost Service was delivered as %+v, want its cluster IPs only", a)
	}
	// destination_source_cached_objects says so: the kept service's Service and slice in
	// full, the lost Service reduced, no placeholder left.
	got := map[string]float64{}
	for _, m := range testutil.Gathered(t, reg, "destination_source_cached_objects") {
		l := map[string]string{}
		for _, p := range m.GetLabel() {
			l[p.GetName()] = p.GetValue()
		}
		got[l["resource"]+"/"+l["form"]] = m.GetGauge().GetValue()
	}
	want := map[string]float64{"services/full": 1, "services/reduced": 1, "endpointslices/full": 1, "endpointslices/reduced": 0}
	if !maps.Equal(got, want) {
		t.Fatalf("destination_source_cached_objects = %v, want %v", got, want)
	}
	// One list each so far (no relist).
	for _, m := range testutil.Gathered(t, reg, "destination_source_lists_total") {
		if v := m.GetCounter().GetValue(); v != 1 {
			t.Errorf("destination_source_lists_total %v = %v, want 1", m.GetLabel(), v)
		}
	}
	if n := len(testutil.Gathered(t, reg, "destination_source_lists_total")); n != 2 {
		t.Errorf("destination_source_lists_total has %d series, want 2 (services, endpointslices)", n)
	}
}

// TestShareRelistKeepsOneCopy: an object the reflector lists again unchanged (a relist after a
// watch it could not resume) enters the cache as the very object the handler already holds,
// not as a second copy (reuseCached); a changed one enters as itself.
func TestShareRelistKeepsOneCopy(t *testing.T) {
	env := kubetest.Start(t)
	ns := env.Namespace(t, nil)
	ctx := apiCtx(t)
	create(t, ctx, env.Client, testService(ns, "a1"), testSlice(ns, "a1-s", "a1", "10.1.0.1"))
	src, rec := startFiltered(t, env, ns, "a")
	key := KindEndpointSlice + " " + ns + "/a1-s"
	held, _ := rec.get(key).(*translator.EndpointSlice)
	if held == nil || src.stored("EndpointSlice", ns+"/a1-s") != any(held) {
		t.Fatalf("the handler holds %p, the cache %p: want one object", held, src.stored("EndpointSlice", ns+"/a1-s"))
	}
	relisted, err := env.Client.DiscoveryV1().EndpointSlices(ns).Get(ctx, "a1-s", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	lw := src.shares[1].lw
	got, err := lw.slim(relisted)
	if err != nil {
		t.Fatal(err)
	}
	if got != any(held) {
		t.Fatalf("a relisted copy of the cached slice became %p, want the cached %p", got, held)
	}
	relisted.ResourceVersion += "0"
	if got, _ := lw.slim(relisted); got == any(held) {
		t.Fatal("a slice of another resourceVersion was taken for the cached one")
	}
}

// TestFactoryRelistKeepsOneCopy: the same for the factory's informers (Pods always; Services
// and EndpointSlices for a handler without a filter).
func TestFactoryRelistKeepsOneCopy(t *testing.T) {
	env := kubetest.Start(t)
	ns := env.Namespace(t, nil)
	ctx := apiCtx(t)
	create(t, ctx, env.Client, testService(ns, "a1"), testSlice(ns, "a1-s", "a1", "10.1.0.1"), testPod(ns, "p1"))
	src := NewKubernetes(env.Client, KubernetesConfig{Namespace: ns}, prometheus.NewRegistry(), zaptest.NewLogger(t))
	rec := newRecorder()
	testutil.Go(t, "Run", func(ctx context.Context) error { return src.Run(ctx, rec) })
	testutil.Eventually(t, apiTimeout, "informers to sync", src.Synced)
	pod, err := env.Client.CoreV1().Pods(ns).Get(ctx, "p1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := env.Client.CoreV1().Services(ns).Get(ctx, "a1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	es, err := env.Client.DiscoveryV1().EndpointSlices(ns).Get(ctx, "a1-s", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		key      string
		relisted any
	}{{KindPod + " " + ns + "/p1", pod}, {KindService + " " + ns + "/a1", svc}, {KindEndpointSlice + " " + ns + "/a1-s", es}} {
		held := rec.get(c.key)
		if held == nil {
			t.Fatalf("%s was not delivered", c.key)
		}
		got, err := src.slimFactory(c.relisted)
		if err != nil {
			t.Fatal(err)
		}
		if got != any(held) {
			t.Errorf("a relisted copy of %s became %p, want the object the handler holds (%p)", c.key, got, held)
		}
	}
}

// relabelSlice changes the service-name label of the slice ns/name to svc.
func relabelSlice(t *testing.T, env *kubetest.Env, ns, name, svc string) {
	t.Helper()
	modifySlice(t, env, ns, name, func(es *discoveryv1.EndpointSlice) { es.Labels[discoveryv1.LabelServiceName] = svc })
}

// TestShareSliceRelabeled: a wanted slice whose service-name label comes to name a service the
// handler does not want is delivered as a deletion (the handler would otherwise serve it
// under its old service for as long as it runs) and leaves the cache; an unwanted slice
// relabelled to a wanted service is delivered whole.
func TestShareSliceRelabeled(t *testing.T) {
	env, ns, _ := twoServices(t)
	src, rec := startFiltered(t, env, ns, "a")
	keyA, keyB := KindEndpointSlice+" "+ns+"/a1-s", KindEndpointSlice+" "+ns+"/b1-s"
	if rec.get(keyA) == nil {
		t.Fatal("the wanted slice was not delivered")
	}
	relabelSlice(t, env, ns, "a1-s", "b1")
	testutil.Eventually(t, apiTimeout, "the relabelled slice's deletion", func() bool { return rec.get(keyA) == nil })
	if got := src.storeKeys("EndpointSlice"); len(got) != 0 {
		t.Fatalf("slice cache holds %v, want nothing", got)
	}
	relabelSlice(t, env, ns, "b1-s", "a2")
	testutil.Eventually(t, apiTimeout, "the slice relabelled to a wanted service", func() bool {
		es, _ := rec.get(keyB).(*translator.EndpointSlice)
		return es != nil && es.Service == "a2" && len(es.Endpoints) == 1
	})
}
