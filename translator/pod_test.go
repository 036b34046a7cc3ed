package translator

import (
	"fmt"
	"reflect"
	"runtime"
	"testing"
	"time"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meridian-mesh/meridian/internal/testutil"
	"github.com/meridian-mesh/meridian/snapshot"
)

// checkPodProjection checks the projection contract on one pod: projecting the API object of
// a projection (unslimPod) gives the projection again, Project projects (and keeps a
// projection as it is), a deep copy is equal, and the input is not modified.
func checkPodProjection(t *testing.T, what string, x *corev1.Pod) {
	t.Helper()
	in := normal(x)
	s := SlimPod(x)
	if again := SlimPod(unslimPod(s)); !reflect.DeepEqual(again, s) {
		t.Fatalf("pod %s: projecting a projection differs:\n%+v\n%+v", what, again, s)
	}
	if x == nil {
		return
	}
	if p, ok := Project(x).(*Pod); !ok || !reflect.DeepEqual(p, s) {
		t.Fatalf("pod %s: Project gives %+v, want %+v", what, Project(x), s)
	}
	if Project(s) != any(s) {
		t.Fatalf("pod %s: Project copies a projection", what)
	}
	if c := s.DeepCopyObject(); !reflect.DeepEqual(c, s) {
		t.Fatalf("pod %s: DeepCopyObject differs:\n%+v\n%+v", what, c, s)
	}
	if !reflect.DeepEqual(normal(x), in) {
		t.Fatalf("pod %s: input modified", what)
	}
}

// TestPodShares: pods with the same labels share one map, and the same port annotations
// another; names repeated across pods are held once; a change to the API object after the
// projection does not reach it.
func TestPodShares(t *testing.T) {
	a := fatPod(pod("ns", "a", meshed("linkerd"), owned("ReplicaSet", "web-abc"), label(LabelPodTemplateHash, "abc"), annotate(AnnotationOpaquePorts, "http")))
	b := fatPod(pod("ns", "b", meshed("linkerd"), owned("ReplicaSet", "web-abc"), label(LabelPodTemplateHash, "abc"), annotate(AnnotationOpaquePorts, "http")))
	c := fatPod(pod("ns", "c", meshed("linkerd"), owned("ReplicaSet", "web-def"), label(LabelPodTemplateHash, "def")))
	pa, pb, pc := SlimPod(a), SlimPod(b), SlimPod(c)
	if pa.labels == nil || pa.labels != pb.labels || pa.labels == pc.labels {
		t.Fatalf("label maps %p %p %p: a and b have the same labels, c others", pa.labels, pb.labels, pc.labels)
	}
	if pa.annotations == nil || pa.annotations != pb.annotations || pc.annotations != nil {
		t.Fatalf("annotation maps %p %p %p: a and b have the same port annotations, c none", pa.annotations, pb.annotations, pc.annotations)
	}
	if pa.namespace != pc.namespace || pa.ownerName != pb.ownerName || pa.ownerName == pc.ownerName || pa.NodeName() != "node-1" {
		t.Fatalf("names: %q %q %q", pa.Namespace(), pa.ownerName.Value(), pc.ownerName.Value())
	}
	if ps := pa.NamedPorts(); len(ps) != 3 || ps[0].Name() != "linkerd-admin" || !ps[0].Init || ps[1].Name() != "http" || ps[1].Port != 8080 || ps[1].Init {
		t.Fatalf("named ports %+v", ps)
	}
	a.Labels[LabelControlPlaneNS] = "x"
	a.Annotations[AnnotationOpaquePorts] = "9"
	a.Spec.Containers[0].Ports[0].ContainerPort = 1
	if pa.Label(LabelControlPlaneNS) != "linkerd" || pa.GetAnnotations()[AnnotationOpaquePorts] != "http" || !hasNamedPort(pa, "http", 8080) {
		t.Fatal("a change to the API object reached its projection")
	}
}

// TestInternedGo: a label map no pod holds any more, and a label slice no endpoint holds,
// leave their tables.
func TestInternedGo(t *testing.T) {
	pods := make([]*Pod, 100)
	labels := make([][]snapshot.Label, 100)
	for i := range pods {
		pods[i] = SlimPod(pod("ns", "p", label("app", fmt.Sprintf("gone-%d", i))))
		labels[i] = internLabels([]snapshot.Label{{Key: "gone", Value: fmt.Sprint(i)}})
	}
	maps, ls := mapTable.len(), labelTable.len()
	if maps < 100 || ls < 100 {
		t.Fatalf("%d maps and %d label slices in the tables, want at least 100 each", maps, ls)
	}
	runtime.KeepAlive(pods)
	runtime.KeepAlive(labels)
	pods, labels = nil, nil
	testutil.Eventually(t, 10*time.Second, "the maps and label slices to leave their tables", func() bool {
		runtime.GC()
		return mapTable.len() <= maps-100 && labelTable.len() <= ls-100
	})
}

// TestInternLabels: equal labels give one slice, whose capacity is its length; other labels
// another; the result does not share the caller's buffer.
func TestInternLabels(t *testing.T) {
	buf := []snapshot.Label{{Key: "a", Value: "1"}, {Key: "b", Value: "2"}, {}}
	x := internLabels(buf[:2])
	buf[0].Value = "9"
	y := internLabels([]snapshot.Label{{Key: "a", Value: "1"}, {Key: "b", Value: "2"}})
	z := internLabels([]snapshot.Label{{Key: "a", Value: "1"}})
	if &x[0] == &buf[0] || &x[0] != &y[0] || len(x) != 2 || cap(x) != 2 || x[0].Value != "1" || &z[0] == &x[0] || len(z) != 1 {
		t.Fatalf("interned %v %v %v", x, y, z)
	}
	if internLabels(nil) != nil {
		t.Fatal("no labels interned as some")
	}
	// Looking up labels and label maps in use allocates nothing.
	m := map[string]string{"app": "web", "pod-template-hash": "abc"}
	held := internMap(m, allKeys)
	if n := testing.AllocsPerRun(100, func() { internLabels(x); internMap(m, allKeys) }); n != 0 {
		t.Errorf("interning what is in use allocates %v times", n)
	}
	runtime.KeepAlive(x)
	runtime.KeepAlive(held)
}

// TestPodObject: a Pod serves client-go's key functions (which read it through meta.Accessor)
// and the lag histograms through metav1.Object, and a setter of a field it does not keep
// changes nothing.
func TestPodObject(t *testing.T) {
	base := basePod()
	p := SlimPod(base)
	if m, err := meta.Accessor(p); err != nil || m.GetNamespace()+"/"+m.GetName() != "ns/web-abc-1" {
		t.Fatalf("meta.Accessor: %v, %v", m, err)
	}
	var o metav1.Object = p
	if o.GetUID() != "uid-1" || o.GetResourceVersion() != "7" || o.GetDeletionTimestamp() == nil || o.GetLabels()["*"] == "" {
		t.Fatalf("metav1.Object: %+v", unslimPod(p))
	}
	if got := p.NewestManagedTime(); !got.Equal(baseTime.Time) {
		t.Fatalf("newest managed time %v, want %v", got, baseTime)
	}
	if refs := o.GetOwnerReferences(); len(refs) != 1 || refs[0].Kind != "ReplicaSet" || refs[0].Name != "web-abc" || refs[0].Controller == nil || !*refs[0].Controller {
		t.Fatalf("owner references %+v", refs)
	}
	want := p.DeepCopy()
	o.SetGeneration(3)
	o.SetFinalizers([]string{"f"})
	o.SetCreationTimestamp(metav1.Now())
	o.SetAnnotations(map[string]string{AnnotationOpaquePorts: "http", AnnotationSkipInboundPorts: "9090", "other": "x"})
	if !reflect.DeepEqual(p, want) {
		t.Fatalf("setting dropped fields changed the pod: %+v", unslimPod(p))
	}
	o.SetNamespace("other")
	o.SetLabels(map[string]string{"app": "x"})
	if p.Namespace() != "other" || p.Label("app") != "x" || p.Label("*") != "" {
		t.Fatalf("setters: %+v", unslimPod(p))
	}
}

// TestPodSize guards the size of a Pod projection, which every replica keeps per pod (on
// 64-bit machines).
func TestPodSize(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("sizes are for 64-bit machines")
	}
	if n := unsafe.Sizeof(Pod{}); n > 192 {
		t.Errorf("a Pod is %d bytes, want at most 192", n)
	}
}

// TestPodEndpointsShareLabels: the addresses of the pods of one Deployment in one zone share
// one label slice, in one set and across sets; their pod label is their Pod.
func TestPodEndpointsShareLabels(t *testing.T) {
	cfg := DefaultConfig()
	svc, sl, pods := benchService(6) // zones 0, 1, 2, 0, 1, 2
	a := addressSet(cfg, svc, 80, sl, pods.lookup)
	b := addressSet(cfg, svc, 80, sl, pods.lookup)
	byPod := map[string]*snapshot.Endpoint{}
	for _, e := range a.Endpoints {
		byPod[e.PodName()] = e
	}
	e0, e3 := byPod["web-7c9d8f6b5-00000"], byPod["web-7c9d8f6b5-00003"]
	e1 := byPod["web-7c9d8f6b5-00001"]
	if e0 == nil || e3 == nil || e1 == nil || &e0.Labels[0] != &e3.Labels[0] || &e0.Labels[0] == &e1.Labels[0] {
		t.Fatalf("label slices: %p %p %p", e0.Labels, e3.Labels, e1.Labels)
	}
	if &b.Endpoints[0].Labels[0] != &a.Endpoints[0].Labels[0] {
		t.Fatal("a set computed again does not share the labels of the first")
	}
	if e0.Label(LabelKeyPod) != "web-7c9d8f6b5-00000" || e0.Label(LabelKeyServiceAccount) != "web" {
		t.Fatalf("labels of %s: %q", e0.PodName(), render(e0))
	}
}

// TestProxyInboundPort reads a pod's proxy inbound port as linkerd2's destination does
// (getInboundPort): the proxy container's LINKERD2_PROXY_INBOUND_LISTEN_ADDR, init containers
// first; anything else gives 0 (the configured port applies).
func TestProxyInboundPort(t *testing.T) {
	proxy := func(name, value string) corev1.Container {
		return corev1.Container{Name: name, Env: []corev1.EnvVar{{Name: "OTHER", Value: "[::]:1"}, {Name: EnvInboundListenAddr, Value: value}}}
	}
	for _, c := range []struct {
		name       string
		init, main []corev1.Container
		want       uint16
	}{
		{"a container", nil, []corev1.Container{{Name: "app"}, proxy(ProxyContainerName, "0.0.0.0:4143")}, 4143},
		{"IPv6", nil, []corev1.Container{proxy(ProxyContainerName, "[::]:4243")}, 4243},
		{"a native sidecar", []corev1.Container{{Name: "init"}, proxy(ProxyContainerName, "[::]:4343")}, []corev1.Container{proxy("app", "[::]:4243")}, 4343},
		{"another container's variable", nil, []corev1.Container{proxy("app", "[::]:4243")}, 0},
		{"no variable", nil, []corev1.Container{{Name: ProxyContainerName}}, 0},
		{"a port without an address", nil, []corev1.Container{proxy(ProxyContainerName, "4243")}, 0},
		{"a host name", nil, []corev1.Container{proxy(ProxyContainerName, "localhost:4243")}, 0},
		{"a port out of range", nil, []corev1.Container{proxy(ProxyContainerName, "[::]:65536")}, 0},
	} {
		spec := &corev1.PodSpec{InitContainers: c.init, Containers: c.main}
		if got := ProxyInboundPort(spec); got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
		if got := SlimPod(&corev1.Pod{Spec: *spec}).InboundPort(); got != c.want {
			t.Errorf("%s: the projection's %d, want %d", c.name, got, c.want)
		}
	}
}
