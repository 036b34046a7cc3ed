package source

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/meridian-mesh/meridian/internal/kube"
	"github.com/meridian-mesh/meridian/internal/kubetest"
	"github.com/meridian-mesh/meridian/internal/testutil"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/meridian-mesh/meridian/translator"
)

func TestMain(m *testing.M) { os.Exit(testutil.Main(m, kubetest.Main)) }

// apiTimeout bounds each call to the API server and each wait for an event.
const apiTimeout = 30 * time.Second

func apiCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), apiTimeout)
	t.Cleanup(cancel)
	return ctx
}

// startKubernetes runs a Kubernetes source on ns of the shared API server and waits until
// it has synced.
func startKubernetes(t *testing.T, env *kubetest.Env, ns string) (*Kubernetes, *recorder, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	src := NewKubernetes(env.Client, KubernetesConfig{Namespace: ns}, reg, zaptest.NewLogger(t))
	rec := newRecorder()
	testutil.Go(t, "Run", func(ctx context.Context) error { return src.Run(ctx, rec) })
	testutil.Eventually(t, apiTimeout, "informers to sync", src.Synced)
	return src, rec, reg
}

func testService(ns, name string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app": name},
			Annotations: map[string]string{corev1.LastAppliedConfigAnnotation: `{"big":"copy"}`, "other": "dropped", translator.AnnotationOpaquePorts: "3306"}},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": name},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}},
		},
	}
}

func testSlice(ns, name, svc string, addrs ...string) *discoveryv1.EndpointSlice {
	es := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080)}},
	}
	for _, a := range addrs {
		es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{Addresses: []string{a}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
	}
	return es
}

// testPod is a meshed pod whose opaque-ports annotation names its container port "http".
func testPod(ns, name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app": "web", "linkerd.io/control-plane-ns": "linkerd"},
			Annotations: map[string]string{translator.AnnotationOpaquePorts: "http", "other": "dropped"}},
		Spec: corev1.PodSpec{
			ServiceAccountName: "web",
			Volumes:            []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
			InitContainers: []corev1.Container{{
				Name: "linkerd-proxy", Image: "proxy:dev", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways),
				Env: []corev1.EnvVar{{Name: "LINKERD2_PROXY_INBOUND_LISTEN_ADDR", Value: "0.0.0.0:4243"}, {Name: "OTHER", Value: "x"}},
			}},
			Containers: []corev1.Container{{
				Name: "web", Image: "web:1", Command: []string{"/web", "--serve"},
				Ports:          []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}, {Name: "metrics", ContainerPort: 9090}},
				Env:            []corev1.EnvVar{{Name: "SECRET_STUFF", Value: "long value"}},
				VolumeMounts:   []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstr.FromString("http")}}},
			}},
		},
	}
}

// histogramCount returns the observations of the histogram name on reg, failing the test
// when reg has no such metric.
func histogramCount(t *testing.T, reg *prometheus.Registry, name string) uint64 {
	t.Helper()
	if testutil.Gathered(t, reg, name) == nil {
		t.Fatalf("metric %s not registered", name)
	}
	return testutil.HistogramSamples(t, reg, name)
}

// create creates objs (Services, EndpointSlices and Pods) through the API.
func create(t *testing.T, ctx context.Context, c kubernetes.Interface, objs ...metav1.Object) {
	t.Helper()
	for _, o := range objs {
		var err error
		switch o := o.(type) {
		case *corev1.Service:
			_, err = c.CoreV1().Services(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *discoveryv1.EndpointSlice:
			_, err = c.DiscoveryV1().EndpointSlices(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *corev1.Pod:
			_, err = c.CoreV1().Pods(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		default:
			t.Fatalf("create: unexpected %T", o)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// checkProjected checks that the transform replaced the objects TestKubernetesSource created by
// translator's projection of them, and returns the pod the handler received.
func checkProjected(t *testing.T, rec *recorder, ns string) *translator.Pod {
	t.Helper()
	svc := rec.get("Service " + ns + "/web").(*corev1.Service)
	if !translator.IsSlimService(svc) || len(svc.Annotations) != 1 || svc.Annotations[translator.AnnotationOpaquePorts] != "3306" ||
		svc.Spec.Selector != nil || svc.Spec.Ports[0].Port != 80 {
		t.Errorf("service after transform: %+v", svc)
	}
	if es := rec.get("EndpointSlice " + ns + "/web-1").(*translator.EndpointSlice); len(es.Endpoints) != 1 || es.Endpoints[0].Addr(es).String() != "10.0.0.1" || es.Service != "web" {
		t.Errorf("slice after transform: %+v", es)
	}
	pod, ok := rec.get("Pod " + ns + "/web-a").(*translator.Pod)
	if !ok {
		t.Fatalf("pod after transform is not a projection: %T", rec.get("Pod "+ns+"/web-a"))
	}
	if mf := svc.ManagedFields; len(mf) != 1 || mf[0].Time == nil || mf[0].FieldsV1 != nil || mf[0].Manager == "" {
		t.Errorf("service managedFields after transform: %+v", mf)
	}
	if mf := pod.GetManagedFields(); len(mf) != 1 || mf[0].Time == nil || pod.NewestManagedTime().IsZero() {
		t.Errorf("pod managedFields after transform: %+v", mf)
	}
	// Of the proxy's environment only its inbound port stays (the opaque-transport port), so
	// the init containers, which have no named port, go with the rest. The labels stay:
	// Servers select pods by them.
	if pod.Label("app") != "web" || pod.GetAnnotations()["other"] != "" {
		t.Errorf("pod not projected: labels %v, annotations %v", pod.GetLabels(), pod.GetAnnotations())
	}
	if pod.InboundPort() != 4243 {
		t.Errorf("pod's proxy inbound port after transform: %d, want 4243", pod.InboundPort())
	}
	var ports []string
	for _, p := range pod.NamedPorts() {
		ports = append(ports, fmt.Sprintf("%s=%d init=%v", p.Name(), p.Port, p.Init))
	}
	if want := []string{"http=8080 init=false", "metrics=9090 init=false"}; !slices.Equal(ports, want) {
		t.Errorf("pod named ports after transform: %q, want %q", ports, want)
	}
	if pod.ServiceAccountName() != "web" || pod.Label("linkerd.io/control-plane-ns") != "linkerd" || pod.UID == "" {
		t.Errorf("pod lost fields Meridian reads: %+v", pod)
	}
	return pod
}

// checkCacheAndReplay checks that Pod reads the informer cache, which holds the projections
// (pod is the one the handler received), and that Replay delivers the caches again.
func checkCacheAndReplay(t *testing.T, ctx context.Context, src *Kubernetes, rec *recorder, ns string, pod *translator.Pod) {
	t.Helper()
	// The informer cache holds the projection, the very object the handler received.
	if p := src.Pod(ns, "web-a"); p != pod || p.ServiceAccountName() != "web" {
		t.Errorf("Pod(%s, web-a) = %v, want the projection the handler received", ns, p)
	}
	for _, store := range src.stores {
		for _, obj := range store.List() {
			if translator.Project(obj) != obj {
				t.Errorf("the informer cache holds %T %v, not its projection", obj, obj)
			}
		}
	}
	if p := src.Pod(ns, "nope"); p != nil {
		t.Errorf("Pod of an unknown pod = %v", p)
	}
	rec.Take()
	if err := src.Replay(ctx); err != nil {
		t.Fatal(err)
	}
	replayed := strings.Join(rec.Take(), ",")
	for _, k := range []string{"+Pod " + ns + "/web-a", "+Service " + ns + "/web", "+EndpointSlice " + ns + "/web-1"} {
		if !strings.Contains(replayed, k) {
			t.Errorf("Replay did not deliver %s: %s", k, replayed)
		}
	}
}

// update changes the Service, EndpointSlice and Pod TestKubernetesSource created.
func update(t *testing.T, ctx context.Context, c kubernetes.Interface, ns string) {
	t.Helper()
	full, err := c.CoreV1().Services(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	full.Annotations[translator.AnnotationOpaquePorts] = "3306,5432"
	if _, err := c.CoreV1().Services(ns).Update(ctx, full, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	es, err := c.DiscoveryV1().EndpointSlices(ns).Get(ctx, "web-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// A ready endpoint and a not-ready one, which the projection drops.
	es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{Addresses: []string{"10.0.0.2"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}},
		discoveryv1.Endpoint{Addresses: []string{"10.0.0.3"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(false)}})
	if _, err := c.DiscoveryV1().EndpointSlices(ns).Update(ctx, es, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	p, err := c.CoreV1().Pods(ns).Get(ctx, "web-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Status.PodIP = "10.0.0.1"
	p.Status.PodIPs = []corev1.PodIP{{IP: "10.0.0.1"}}
	p.Status.Phase = corev1.PodRunning
	if _, err := c.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestKubernetesSource(t *testing.T) {
	env := kubetest.Start(t)
	ns := env.Namespace(t, nil)
	other := env.Namespace(t, nil)
	src, rec, reg := startKubernetes(t, env, ns)
	ctx := apiCtx(t)
	c := env.Client

	// Adds.
	create(t, ctx, c, testService(ns, "web"), testSlice(ns, "web-1", "web", "10.0.0.1"), testPod(ns, "web-a"), testService(other, "elsewhere"))
	testutil.Eventually(t, apiTimeout, "the three objects", func() bool {
		return rec.get("Service "+ns+"/web") != nil && rec.get("EndpointSlice "+ns+"/web-1") != nil && rec.get("Pod "+ns+"/web-a") != nil
	})

	// The handler and the cache hold translator's projections; Replay delivers them again.
	pod := checkProjected(t, rec, ns)
	checkCacheAndReplay(t, ctx, src, rec, ns, pod)

	// Updates, each observed in its lag histogram.
	update(t, ctx, c, ns)
	testutil.Eventually(t, apiTimeout, "the three updates", func() bool {
		s, _ := rec.get("Service " + ns + "/web").(*corev1.Service)
		e, _ := rec.get("EndpointSlice " + ns + "/web-1").(*translator.EndpointSlice)
		p, _ := rec.get("Pod " + ns + "/web-a").(*translator.Pod)
		return s != nil && s.Annotations[translator.AnnotationOpaquePorts] == "3306,5432" && e != nil && len(e.Endpoints) == 2 && p != nil &&
			slices.Equal(p.IPs(), []netip.Addr{netip.MustParseAddr("10.0.0.1")})
	})
	for _, name := range []string{"services_informer_lag_seconds", "endpointslices_informer_lag_seconds", "pods_informer_lag_seconds"} {
		if n := histogramCount(t, reg, name); n == 0 {
			t.Errorf("%s has no observations after an update", name)
		}
	}

	// Deletes.
	if err := c.DiscoveryV1().EndpointSlices(ns).Delete(ctx, "web-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.CoreV1().Services(ns).Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// No kubelet runs, so a pod is gone at once only with a zero grace period.
	if err := c.CoreV1().Pods(ns).Delete(ctx, "web-a", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, apiTimeout, "the three deletes", func() bool {
		return rec.get("Service "+ns+"/web") == nil && rec.get("EndpointSlice "+ns+"/web-1") == nil && rec.get("Pod "+ns+"/web-a") == nil
	})
	events := map[string]int{}
	for _, e := range rec.Take() {
		events[e]++
	}
	for _, k := range []string{"Service " + ns + "/web", "EndpointSlice " + ns + "/web-1", "Pod " + ns + "/web-a"} {
		if events["-"+k] != 1 || events["+"+k] < 1 {
			t.Errorf("%s: %d update and %d delete events, want >= 1 and 1", k, events["+"+k], events["-"+k])
		}
	}
	if events["+Service "+other+"/elsewhere"] != 0 {
		t.Errorf("a Service of another namespace was delivered")
	}
}

// TestKubernetesResyncAfterRestart cuts every watch by restarting the API server and checks
// that changes made afterwards, and objects created before, are all delivered.
func TestKubernetesResyncAfterRestart(t *testing.T) {
	env := kubetest.Start(t)
	ns := env.Namespace(t, nil)
	_, rec, reg := startKubernetes(t, env, ns)
	ctx := apiCtx(t)
	c := env.Client
	create(t, ctx, c, testService(ns, "before"), testSlice(ns, "before-1", "before", "10.0.0.1"))
	testutil.Eventually(t, apiTimeout, "the objects created before the restart", func() bool {
		return rec.get("Service "+ns+"/before") != nil && rec.get("EndpointSlice "+ns+"/before-1") != nil
	})
	lagBefore := histogramCount(t, reg, "endpointslices_informer_lag_seconds")

	env.Restart(t)

	ctx = apiCtx(t)
	var err error
	// The restarted server may take a moment to accept writes.
	testutil.Eventually(t, apiTimeout, "the API server to accept writes again", func() bool {
		_, err = c.CoreV1().Services(ns).Create(ctx, testService(ns, "after"), metav1.CreateOptions{})
		return err == nil || apierrors.IsAlreadyExists(err)
	})
	es, err := c.DiscoveryV1().EndpointSlices(ns).Get(ctx, "before-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	es.Endpoints[0].Addresses = []string{"10.0.0.9"}
	if _, err := c.DiscoveryV1().EndpointSlices(ns).Update(ctx, es, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.CoreV1().Services(ns).Delete(ctx, "before", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 2*apiTimeout, "the changes made after the restart", func() bool {
		e, _ := rec.get("EndpointSlice " + ns + "/before-1").(*translator.EndpointSlice)
		return rec.get("Service "+ns+"/after") != nil && rec.get("Service "+ns+"/before") == nil &&
			e != nil && e.Endpoints[0].Addr(e).String() == "10.0.0.9"
	})
	if histogramCount(t, reg, "endpointslices_informer_lag_seconds") <= lagBefore {
		t.Errorf("the slice update after the restart was not observed in the lag histogram")
	}
}

func TestSlimObjectIdempotent(t *testing.T) {
	now := metav1.Now()
	older := metav1.NewTime(now.Add(-time.Hour))
	pod := testPod("ns", "p")
	pod.ManagedFields = []metav1.ManagedFieldsEntry{
		{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply, Time: &older, FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{}}`)},
		{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate, Time: &now, FieldsV1: metav1.NewFieldsV1(`{"f:status":{}}`)},
		{Manager: "nil-time"},
	}
	in := pod.DeepCopy()
	once, _ := slimObject(pod)
	first := once.(*translator.Pod).DeepCopy()
	twice, _ := slimObject(once)
	if twice != once {
		t.Error("the transform copies a projected pod again")
	}
	if got := twice.(*translator.Pod); !reflect.DeepEqual(first, got) {
		t.Errorf("transform is not idempotent:\n%+v\n%+v", first, got)
	}
	if !equalPods(pod, in) {
		t.Error("the transform modified its input")
	}
	mf := first.GetManagedFields()
	if len(mf) != 1 || !mf[0].Time.Equal(&now) || mf[0].FieldsV1 != nil {
		t.Errorf("managedFields = %+v, want only the newest time", mf)
	}
	if got := kube.NewestManagedTime(first); !got.Equal(now.Time) {
		t.Errorf("newestManagedTime = %v, want %v", got, now)
	}
	for _, obj := range []any{testService("ns", "s"), testSlice("ns", "s-1", "s", "10.0.0.1")} {
		once, _ := slimObject(obj)
		if once == obj || translator.Project(once) != once {
			t.Errorf("%T: the transform does not project it", obj)
		}
		if twice, _ := slimObject(once); twice != once {
			t.Errorf("%T: the transform copies a projection again", obj)
		}
	}
	// A tombstone carries its object projected; anything else passes unchanged.
	got, _ := slimObject(cache.DeletedFinalStateUnknown{Key: "ns/p", Obj: in})
	if d, ok := got.(cache.DeletedFinalStateUnknown); !ok || d.Key != "ns/p" || !isPod(d.Obj) {
		t.Errorf("tombstone after transform: %+v", got)
	}
	cm := &corev1.ConfigMap{}
	if got, err := slimObject(cm); got != any(cm) || err != nil {
		t.Errorf("a ConfigMap after transform: %v, %v", got, err)
	}
}

func isPod(o any) bool {
	_, ok := o.(*translator.Pod)
	return ok
}

func equalPods(a, b *corev1.Pod) bool {
	return a.String() == b.String()
}

// TestStalePlaceholderNotDelivered: the placeholder of a slice is delivered as a deletion only
// while the share cache does not hold the slice whole. The informer's listener calls the
// handler after the cache changed; when the slice came back under a wanted service meanwhile
// (a later event, or Gain, which stores and delivers from its list), the placeholder is stale,
// and delivered it would take the slice out of that service.
func TestStalePlaceholderNotDelivered(t *testing.T) {
	lw := &shareLW{kind: endpointSliceKind("")}
	inf := cache.NewSharedIndexInformer(&cache.ListWatch{}, &translator.EndpointSlice{}, 0, cache.Indexers{})
	k := &Kubernetes{log: zap.NewNop(), shares: []*shareInformer{{lw: lw, informer: inf}}}
	rec := newRecorder()
	eh := eventHandler(k, nil, rec.OnEndpointSlice)
	placeholder := lw.kind.placeholder(objMeta{namespace: "ns", name: "s1", resourceVersion: "5", service: "p"})
	whole := translator.SlimEndpointSlice(testSlice("ns", "s1", "q", "10.0.0.1"))
	if err := inf.GetStore().Add(whole); err != nil {
		t.Fatal(err)
	}
	eh.OnDelete(placeholder)
	if ev := rec.Take(); len(ev) != 0 {
		t.Fatalf("a stale placeholder was delivered: %v", ev)
	}
	if err := inf.GetStore().Delete(whole); err != nil {
		t.Fatal(err)
	}
	eh.OnDelete(placeholder)
	if ev := rec.Take(); !slices.Equal(ev, []string{"-" + KindEndpointSlice + " ns/s1"}) {
		t.Fatalf("the placeholder of a slice the cache lacks: events %v, want its deletion", ev)
	}
	if es, _ := rec.deletedAs(KindEndpointSlice + " ns/s1").(*translator.EndpointSlice); !IsPlaceholder(es) || es.Service != "p" {
		t.Fatalf("delivered %+v, want the placeholder naming p", es)
	}
}

// TestUpdateToWholeSameVersion: an update that replaces what the cache kept of a Service
// (serviceIPs) by the whole Service at the same resourceVersion is delivered (a relist under a
// filter that gained the service; Gain, seeing it whole in the cache, does not deliver it),
// while an update at the same version that changes nothing of the kind is a resync.
func TestUpdateToWholeSameVersion(t *testing.T) {
	reg := prometheus.NewRegistry()
	lag, err := kube.NewLag(reg, "services")
	if err != nil {
		t.Fatal(err)
	}
	var got []*corev1.Service
	h := eventHandler(&Kubernetes{log: zaptest.NewLogger(t)}, lag, func(s *corev1.Service, deleted bool) {
		if !deleted {
			got = append(got, s)
		}
	})
	m := objMeta{name: "web", namespace: "shop", resourceVersion: "7"}
	written := metav1.NewTime(time.Now().Add(-time.Hour))
	whole := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop", ResourceVersion: "7",
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl", Time: &written}}},
		Spec: corev1.ServiceSpec{ClusterIP: "10.0.0.9", Ports: []corev1.ServicePort{{Port: 80}}}}
	h.OnUpdate(compactIPs(m, "10.0.0.9", nil), compactIPs(m, "10.0.0.9", nil))
	h.OnUpdate(whole, whole)
	if len(got) != 0 {
		t.Fatalf("resyncs delivered %d Services", len(got))
	}
	h.OnUpdate(compactIPs(m, "10.0.0.9", nil), whole)
	if len(got) != 1 || got[0] != whole {
		t.Fatalf("reduced to whole at the same version delivered %v, want the whole Service", got)
	}
	// Written an hour ago and read again by a relist: not an hour of informer lag.
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "services_informer_lag_seconds" && mf.GetMetric()[0].GetHistogram().GetSampleCount() != 0 {
			t.Fatalf("the same version was observed as informer lag: %v", mf)
		}
	}
}
