package translator

import (
	"reflect"
	"testing"
	"time"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// managedTime0 is the time of the older managedFields entry fatMeta adds; the newer one is a
// minute later.
var managedTime0 = time.Date(2026, 11, 30, 1, 0, 0, 0, time.UTC)

// fatMeta adds what a real API object carries and AddressSet does not read.
func fatMeta(m *metav1.ObjectMeta) {
	m.UID = "0b6f0c1e-6b2e-4c1c-9a3b-3c1f7d3d7a10"
	m.ResourceVersion = "12345"
	m.Generation = 3
	m.CreationTimestamp = metav1.NewTime(time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC))
	older, newer := metav1.NewTime(managedTime0), metav1.NewTime(managedTime0.Add(time.Minute))
	m.ManagedFields = []metav1.ManagedFieldsEntry{
		{Manager: "kube-controller-manager", Operation: "Update", APIVersion: "v1", Time: &older, FieldsType: "FieldsV1",
			FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{"f:labels":{".":{}}}}`)},
		{Manager: "kubelet", Operation: "Update", APIVersion: "v1", Time: &newer, FieldsType: "FieldsV1", Subresource: "status",
			FieldsV1: metav1.NewFieldsV1(`{"f:status":{"f:phase":{}}}`)},
		{Manager: "no-time", Operation: "Apply"},
	}
	if m.Labels == nil {
		m.Labels = map[string]string{}
	}
	m.Labels["app.kubernetes.io/name"] = "web"
	if m.Annotations == nil {
		m.Annotations = map[string]string{}
	}
	m.Annotations["kubectl.kubernetes.io/last-applied-configuration"] = `{"big":"blob"}`
}

func fatPod(p *corev1.Pod) *corev1.Pod {
	fatMeta(&p.ObjectMeta)
	p.OwnerReferences = append(p.OwnerReferences, metav1.OwnerReference{Kind: "ConfigMap", Name: "noise"})
	p.Spec.Containers = append(p.Spec.Containers, corev1.Container{
		Name: "app", Image: "ghcr.io/example/web:1.2.3", Args: []string{"--serve"},
		Env:           []corev1.EnvVar{{Name: "A", Value: "b"}, {Name: "LINKERD2_PROXY_INBOUND_LISTEN_ADDR", Value: "[::]:4143"}},
		Ports:         []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}, {ContainerPort: 9090}, {Name: "admin", ContainerPort: 9990}},
		LivenessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/live"}}},
		VolumeMounts:  []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
	})
	p.Spec.InitContainers = append(p.Spec.InitContainers, corev1.Container{Name: "linkerd-proxy", Ports: []corev1.ContainerPort{{Name: "linkerd-admin", ContainerPort: 4191}}})
	p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	p.Spec.NodeName = "node-1"
	p.Status.Phase = corev1.PodRunning
	p.Status.PodIP = "10.0.0.1"
	p.Status.PodIPs = []corev1.PodIP{{IP: "10.0.0.1"}}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	p.Status.HostIP = "192.168.0.1"
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", Ready: true, Image: "ghcr.io/example/web:1.2.3"}}
	return p
}

func slimFixture() (*corev1.Service, []*discoveryv1.EndpointSlice, podIndex) {
	svc := service("ns", "web", sport("http", 80), sport("db", 3306), corev1.ServicePort{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromString("dns")})
	fatMeta(&svc.ObjectMeta)
	svc.Spec.ClusterIP = "10.96.0.10"
	svc.Spec.Selector = map[string]string{"app": "web"}
	svc.Spec.SessionAffinity = corev1.ServiceAffinityNone
	svc.Spec.Ports[0].NodePort = 30080
	svc.Spec.Ports[0].AppProtocol = ptr("http")
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.1"}}
	ports := []discoveryv1.EndpointPort{eport("http", 8080), eport("db", 3306), {Name: ptr("dns"), Port: ptr(int32(53)), Protocol: ptr(corev1.ProtocolUDP)}}
	s1 := eslice("ns", "web-1", "web", v4, ports,
		withZone(endpoint("a", "10.0.0.1"), "z1"),
		withReady(endpoint("b", "10.0.0.2"), ptr(false)),
		withHostname(endpoint("c", "10.0.0.3"), "web-c"),
		endpoint("", "10.0.0.4"),
		endpoint("gone", "10.0.0.5"))
	s1.Endpoints[0].NodeName = ptr("node-1")
	s1.Endpoints[0].Conditions.Serving = ptr(true)
	fatMeta(&s1.ObjectMeta)
	s2 := eslice("ns", "web-2", "web", v6, ports, endpoint("d", "fd00::1"))
	s3 := eslice("ns", "web-3", "web", fqdn, ports, endpoint("", "example.com"))
	pods := index(
		fatPod(pod("ns", "a", meshed("linkerd"), owned("ReplicaSet", "web-abc"), label(LabelPodTemplateHash, "abc"))),
		fatPod(pod("ns", "b", meshed("linkerd"))),
		fatPod(pod("ns", "c", meshed("linkerd"), annotate(AnnotationOpaquePorts, "http"), owned("StatefulSet", "web"))),
		fatPod(pod("ns", "d", meshed("linkerd"), annotate(AnnotationSkipInboundPorts, "3306"))),
		// Behind no slice: only its answers to IsOpaque are compared.
		fatPod(pod("ns", "e", meshed("linkerd"), annotate(AnnotationOpaquePorts, " admin ,8080, Bad_Name,linkerd-admin"))),
	)
	return svc, []*discoveryv1.EndpointSlice{s1, s2, s3}, pods
}

func slimAll(svc *corev1.Service, sl []*discoveryv1.EndpointSlice, pods podIndex) (*corev1.Service, []*discoveryv1.EndpointSlice, podIndex) {
	out := make([]*discoveryv1.EndpointSlice, len(sl))
	for i, s := range sl {
		out[i] = unslim(SlimEndpointSlice(s))
	}
	sp := podIndex{}
	for k, p := range pods {
		sp[k] = unslimPod(SlimPod(p))
	}
	return SlimService(svc), out, sp
}

func TestSlimPreservesAddressSet(t *testing.T) {
	cfg := DefaultConfig()
	svc, sl, pods := slimFixture()
	ssvc, ssl, spods := slimAll(svc, sl, pods)
	for _, port := range []uint32{80, 3306, 53, 7777} {
		for _, host := range []string{"", "web-c"} {
			want := hostSet(cfg, svc, port, host, sl, pods.lookup)
			got := hostSet(cfg, ssvc, port, host, ssl, spods.lookup)
			if !got.Equal(want) {
				t.Errorf("port %d host %q: slim gives\n%q\nwant\n%q", port, host, renderSet(got), renderSet(want))
			}
			if port == 80 && host == "" && want.Len() != 4 {
				t.Errorf("fixture gives %d endpoints on port 80, want 4: %q", want.Len(), renderSet(want))
			}
		}
	}
	for k, p := range pods {
		for _, port := range []uint32{8080, 3306, 25, 9090, 9990, 4191} {
			p, sp := SlimPod(p), SlimPod(spods[k])
			if IsOpaque(cfg, p, port) != IsOpaque(cfg, sp, port) || IsSkippedInbound(p, port) != IsSkippedInbound(sp, port) {
				t.Errorf("pod %s port %d: slim pod answers differently", k, port)
			}
		}
		k1, n1 := Owner(SlimPod(p))
		k2, n2 := Owner(SlimPod(spods[k]))
		if k1 != k2 || n1 != n2 {
			t.Errorf("pod %s: Owner %s/%s, slim %s/%s", k, k1, n1, k2, n2)
		}
	}
}

func TestSlimDropsBulk(t *testing.T) {
	svc, sl, pods := slimFixture()
	ssvc, ssl, spods := slimAll(svc, sl, pods)
	p := spods["ns/a"]
	if p.Annotations["kubectl.kubernetes.io/last-applied-configuration"] != "" || p.Status.Conditions != nil || p.Status.HostIP != "" {
		t.Errorf("slim pod keeps bulk: %+v", p)
	}
	// Every label is kept (Servers select pods by any), and the node (View).
	if p.Name != "a" || p.Namespace != "ns" || p.UID == "" || p.ResourceVersion == "" || p.Status.PodIP != "10.0.0.1" || len(p.OwnerReferences) != 1 ||
		p.Labels["app.kubernetes.io/name"] != "web" || p.Spec.NodeName != "node-1" {
		t.Errorf("slim pod lost identity fields: %+v", p)
	}
	// The named container ports, of containers and init containers, with their numbers only.
	wantPorts := []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}, {Name: "admin", ContainerPort: 9990}}
	for _, k := range []string{"ns/a", "ns/c"} {
		if c := spods[k].Spec.Containers; len(c) != 1 || !reflect.DeepEqual(c[0].Ports, wantPorts) || c[0].Image != "" || c[0].Name != "" || c[0].Env != nil {
			t.Errorf("slim pod %s keeps containers %+v, want only the named ports", k, c)
		}
		if c := spods[k].Spec.InitContainers; len(c) != 1 || !reflect.DeepEqual(c[0].Ports, []corev1.ContainerPort{{Name: "linkerd-admin", ContainerPort: 4191}}) || c[0].Name != "" {
			t.Errorf("slim pod %s keeps init containers %+v, want only the named ports", k, c)
		}
	}
	if c := p.Spec; c.Volumes != nil || len(p.OwnerReferences[0].UID) != 0 {
		t.Errorf("slim pod keeps bulk: %+v", c)
	}
	if ssvc.Spec.Selector != nil || ssvc.Labels != nil || ssvc.Spec.ClusterIP != "10.96.0.10" || ssvc.Spec.SessionAffinity != "" ||
		ssvc.Spec.Ports[0].NodePort != 0 || ssvc.Spec.Ports[0].AppProtocol != nil || ssvc.Status.LoadBalancer.Ingress != nil {
		t.Errorf("slim service: %+v", ssvc)
	}
	s := ssl[0]
	if len(s.Labels) != 1 || len(s.Endpoints) != 4 || s.Endpoints[0].NodeName != nil || s.Endpoints[0].Conditions.Serving != nil {
		t.Errorf("slim slice: %+v", s)
	}
	// Of managedFields, each keeps the newest entry's time (what the informer lag histograms
	// read); a Service and a slice also keep its manager and operation.
	newest := metav1.NewTime(managedTime0.Add(time.Minute))
	want := []metav1.ManagedFieldsEntry{{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate, Time: &newest}}
	for what, mf := range map[string][]metav1.ManagedFieldsEntry{"service": ssvc.ManagedFields, "slice": s.ManagedFields} {
		if !reflect.DeepEqual(mf, want) {
			t.Errorf("slim %s managedFields %+v, want %+v", what, mf, want)
		}
	}
	if mf := p.ManagedFields; !reflect.DeepEqual(mf, []metav1.ManagedFieldsEntry{{Time: &newest}}) {
		t.Errorf("slim pod managedFields %+v, want the time %v", mf, newest)
	}
	if mf := ssl[1].ManagedFields; mf != nil {
		t.Errorf("slim slice without managedFields has %+v", mf)
	}
	if len(ssl[2].Endpoints) != 0 {
		t.Errorf("slim FQDN slice keeps endpoints")
	}
	if SlimPod(nil) != nil || SlimService(nil) != nil || SlimEndpointSlice(nil) != nil {
		t.Error("Slim of nil must be nil")
	}
}

func TestSlimSharesNoMemory(t *testing.T) {
	svc, sl, pods := slimFixture()
	ssvc, _, _ := slimAll(svc, sl, pods)
	ssl := slimSlices(sl)
	*ssl[0].Ports[0].Port = 1
	ssl[0].Endpoints[0].Rare.Zone = "z9"
	if c := ssl[0].DeepCopy(); !reflect.DeepEqual(c, ssl[0]) || c.Endpoints[0].Rare == ssl[0].Endpoints[0].Rare || &c.Ports[0] == &ssl[0].Ports[0] {
		t.Errorf("DeepCopy of a projection differs or shares memory:\n%+v\n%+v", c, ssl[0])
	}
	ssvc.Spec.Ports[0].Port = 1
	*ssvc.ManagedFields[0].Time = metav1.Now()
	if !svc.ManagedFields[1].Time.Equal(&metav1.Time{Time: managedTime0.Add(time.Minute)}) || *sl[0].Ports[0].Port != 8080 || *sl[0].Endpoints[0].Zone != "z1" ||
		svc.Spec.Ports[0].Port != 80 {
		t.Error("a change to a slim copy reached the original")
	}
}

// normal returns a deep copy of obj (a pointer) with empty lists and maps made nil: the IsSlim
// functions do not tell them apart.
func normal[T any](obj *T) *T {
	if obj == nil {
		return nil
	}
	c := reflect.New(reflect.TypeFor[T]())
	c.Elem().Set(reflect.ValueOf(obj).Elem())
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		switch v.Kind() {
		case reflect.Pointer:
			if !v.IsNil() {
				e := reflect.New(v.Type().Elem())
				e.Elem().Set(v.Elem())
				v.Set(e)
				walk(e.Elem())
			}
		case reflect.Slice:
			if v.Len() == 0 {
				v.Set(reflect.Zero(v.Type()))
				return
			}
			if v.Type().Elem().Kind() == reflect.Uint8 {
				return
			}
			n := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
			reflect.Copy(n, v)
			v.Set(n)
			for i := range n.Len() {
				walk(n.Index(i))
			}
		case reflect.Map:
			if v.Len() == 0 {
				v.Set(reflect.Zero(v.Type()))
			}
		case reflect.Struct:
			for i := range v.NumField() {
				if v.Type().Field(i).IsExported() {
					walk(v.Field(i))
				}
			}
		}
	}
	walk(c.Elem())
	return c.Interface().(*T)
}

// checkProjection checks the projection contract on one object: a Slim copy is slim, slimming
// it again changes nothing, Project returns it as it is, and an object IsSlim accepts is one
// Slim leaves as it is. The input is not modified.
func checkProjection[T any](t *testing.T, what string, x *T, slim func(*T) *T, isSlim func(*T) bool, project func(*T) *T) {
	t.Helper()
	in := normal(x)
	s := slim(x)
	if !isSlim(s) {
		t.Fatalf("%s: a slim copy is not slim: %+v", what, s)
	}
	if again := slim(s); !reflect.DeepEqual(normal(again), normal(s)) {
		t.Fatalf("%s: slimming twice differs:\n%+v\n%+v", what, again, s)
	}
	if x != nil && project(s) != s {
		t.Fatalf("%s: Project copies a projection", what)
	}
	if p := project(x); isSlim(x) != (p == x) {
		t.Fatalf("%s: Project returns the input %v, IsSlim says %v", what, p == x, isSlim(x))
	}
	if isSlim(x) && !reflect.DeepEqual(normal(x), normal(s)) {
		t.Fatalf("%s: IsSlim says slim, but slimming changes it:\n%+v\n%+v", what, x, s)
	}
	if !reflect.DeepEqual(normal(x), in) {
		t.Fatalf("%s: input modified", what)
	}
}

func checkAllProjections(t *testing.T, svc *corev1.Service, sl []*discoveryv1.EndpointSlice, pods podIndex) {
	t.Helper()
	checkProjection(t, "service", svc, SlimService, IsSlimService, ProjectService)
	for _, es := range sl {
		checkSliceProjection(t, es)
	}
	for k, p := range pods {
		checkPodProjection(t, k, p)
	}
}

func TestProjectionIdempotent(t *testing.T) {
	svc, sl, pods := slimFixture()
	checkAllProjections(t, svc, sl, pods)
	checkAllProjections(t, nil, []*discoveryv1.EndpointSlice{nil}, podIndex{"nil": nil})
	// Projected twice, the objects still give the same address sets.
	cfg := DefaultConfig()
	ssvc, ssl, spods := slimAll(slimAll(svc, sl, pods))
	for _, port := range []uint32{80, 3306, 53} {
		if got, want := addressSet(cfg, ssvc, port, ssl, spods.lookup), addressSet(cfg, svc, port, sl, pods.lookup); !got.Equal(want) {
			t.Errorf("port %d: projected twice gives\n%q\nwant\n%q", port, renderSet(got), renderSet(want))
		}
	}
	// Project leaves other values alone.
	if cm := (&corev1.ConfigMap{}); Project(cm) != any(cm) || Project(nil) != nil {
		t.Error("Project changes what it does not project")
	}
}

// FuzzProjection checks the projection contract (checkProjection) on fuzzWorld's objects with
// some of what the projection drops added, chosen by extra.
func FuzzProjection(f *testing.F) {
	f.Add([]byte{}, byte(0))
	f.Add([]byte("an arbitrary but longer seed that exercises more of the choices made by fuzzWorld"), byte(3))
	f.Add([]byte{3, 1, 1, 1, 2, 2, 1, 3, 3, 1, 0, 0, 4, 0, 0, 0, 2, 3, 1, 1, 0, 3, 6, 3, 0, 1, 2, 3, 4, 0, 1, 0, 1, 2, 1, 1, 1, 2, 0, 2, 1, 2, 1, 1, 1, 1, 1, 1}, byte(0xff))
	f.Fuzz(func(t *testing.T, data []byte, extra byte) {
		svc, _, sl, pods := fuzzWorld(data)
		t1, t2 := metav1.NewTime(managedTime0), metav1.NewTime(managedTime0.Add(time.Second))
		managed := [][]metav1.ManagedFieldsEntry{nil, {{Manager: "m", Time: &t1}}, {{Manager: "a", Time: &t2, FieldsType: "FieldsV1"}, {Manager: "b", Time: &t1}}, {{Manager: "n"}}}
		svc.ManagedFields = managed[extra>>6]
		if extra&8 != 0 {
			svc.Spec.Selector = map[string]string{"app": "web"}
		}
		for _, es := range sl {
			if es == nil {
				continue
			}
			es.ManagedFields = managed[(extra>>4)&3]
			if extra&1 != 0 && len(es.Endpoints) > 0 {
				es.Endpoints[0].NodeName = ptr("n")
			}
			if extra&2 != 0 {
				es.Annotations = map[string]string{"a": "b"}
			}
			if extra&4 != 0 && len(es.Endpoints) > 0 && es.Endpoints[0].TargetRef != nil {
				es.Endpoints[0].TargetRef.UID = "u"
			}
		}
		for _, p := range pods {
			p.ManagedFields = managed[(extra>>2)&3]
			if extra&16 != 0 {
				p.Spec.NodeName = "node-1"
			}
		}
		checkAllProjections(t, svc, sl, pods)
	})
}

// checkSliceProjection checks the projection contract on one EndpointSlice: projecting the
// API object of a projection (unslim) gives the projection again, Project projects, a deep
// copy is equal, and the input is not modified.
func checkSliceProjection(t *testing.T, x *discoveryv1.EndpointSlice) {
	t.Helper()
	in := normal(x)
	s := SlimEndpointSlice(x)
	if again := SlimEndpointSlice(unslim(s)); !reflect.DeepEqual(normal(again), normal(s)) {
		t.Fatalf("slice: projecting a projection differs:\n%+v\n%+v", again, s)
	}
	if x == nil {
		return
	}
	if p, ok := Project(x).(*EndpointSlice); !ok || !reflect.DeepEqual(p, s) {
		t.Fatalf("slice: Project gives %+v, want %+v", Project(x), s)
	}
	if Project(s) != any(s) {
		t.Fatal("slice: Project copies a projection")
	}
	if c := s.DeepCopyObject(); !reflect.DeepEqual(c, s) {
		t.Fatalf("slice: DeepCopyObject differs:\n%+v\n%+v", c, s)
	}
	if !reflect.DeepEqual(normal(x), in) {
		t.Fatal("slice: input modified")
	}
}

// TestSliceSharesRare: the endpoints of a slice with the same zone and hints and nothing else
// rare share one Rare part; one with a hostname has its own.
func TestSliceSharesRare(t *testing.T) {
	es := SlimEndpointSlice(eslice("ns", "web-1", "web", v4, []discoveryv1.EndpointPort{eport("http", 8080)},
		withZone(endpoint("a", "10.0.0.1"), "z1"), withZone(endpoint("b", "10.0.0.2"), "z1"),
		withZone(endpoint("c", "10.0.0.3"), "z2"), withHostname(withZone(endpoint("d", "10.0.0.4"), "z1"), "web-d"),
		endpoint("e", "10.0.0.5")))
	e := es.Endpoints
	if len(e) != 5 || e[0].Rare != e[1].Rare || e[0].Rare == e[2].Rare || e[3].Rare == e[0].Rare || e[4].Rare != nil {
		t.Fatalf("rare parts %p %p %p %p %p", e[0].Rare, e[1].Rare, e[2].Rare, e[3].Rare, e[4].Rare)
	}
	if e[0].ZoneName() != "z1" || e[2].ZoneName() != "z2" || e[3].ZoneName() != "z1" || e[3].Hostname() != "web-d" || e[4].ZoneName() != "" {
		t.Fatalf("zones %q %q %q %q, hostname %q", e[0].ZoneName(), e[2].ZoneName(), e[3].ZoneName(), e[4].ZoneName(), e[3].Hostname())
	}
}

// TestSliceEndpointSize guards the size of an endpoint of a slice projection, which every
// replica caches per owned endpoint (on 64-bit machines).
func TestSliceEndpointSize(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("sizes are for 64-bit machines")
	}
	if got := unsafe.Sizeof(SliceEndpoint{}); got > 40 {
		t.Errorf("translator.SliceEndpoint is %d bytes, want at most 40: put what few endpoints have in Rare", got)
	}
}
