package translator

import (
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// fat adds what a real API object carries and AddressSet does not read.
func fatMeta(m *metav1.ObjectMeta) {
	m.UID = "0b6f0c1e-6b2e-4c1c-9a3b-3c1f7d3d7a10"
	m.ResourceVersion = "12345"
	m.Generation = 3
	m.CreationTimestamp = metav1.NewTime(time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC))
	m.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager", Operation: "Update",
		FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:labels":{".":{}}}}`)}}}
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
		Env:   []corev1.EnvVar{{Name: "A", Value: "b"}},
		Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}, {ContainerPort: 9090}},
	})
	p.Spec.NodeName = "node-1"
	p.Status.Phase = corev1.PodRunning
	p.Status.PodIP = "10.0.0.1"
	p.Status.PodIPs = []corev1.PodIP{{IP: "10.0.0.1"}}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	return p
}

func slimFixture() (*corev1.Service, []*discoveryv1.EndpointSlice, podIndex) {
	svc := service("ns", "web", sport("http", 80), sport("db", 3306), corev1.ServicePort{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromString("dns")})
	fatMeta(&svc.ObjectMeta)
	svc.Spec.ClusterIP = "10.96.0.10"
	svc.Spec.Selector = map[string]string{"app": "web"}
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
	)
	return svc, []*discoveryv1.EndpointSlice{s1, s2, s3}, pods
}

func slimAll(svc *corev1.Service, sl []*discoveryv1.EndpointSlice, pods podIndex) (*corev1.Service, []*discoveryv1.EndpointSlice, podIndex) {
	out := make([]*discoveryv1.EndpointSlice, len(sl))
	for i, s := range sl {
		out[i] = SlimEndpointSlice(s)
	}
	sp := podIndex{}
	for k, p := range pods {
		sp[k] = SlimPod(p)
	}
	return SlimService(svc), out, sp
}

func TestSlimPreservesAddressSet(t *testing.T) {
	cfg := DefaultConfig()
	svc, sl, pods := slimFixture()
	ssvc, ssl, spods := slimAll(svc, sl, pods)
	for _, port := range []uint32{80, 3306, 53, 7777} {
		for _, host := range []string{"", "web-c"} {
			want := HostAddressSet(cfg, svc, port, host, sl, pods.lookup)
			got := HostAddressSet(cfg, ssvc, port, host, ssl, spods.lookup)
			if !got.Equal(want) {
				t.Errorf("port %d host %q: slim gives\n%q\nwant\n%q", port, host, renderSet(got), renderSet(want))
			}
			if port == 80 && host == "" && want.Len() != 4 {
				t.Errorf("fixture gives %d endpoints on port 80, want 4: %q", want.Len(), renderSet(want))
			}
		}
	}
	for k, p := range pods {
		for _, port := range []uint32{8080, 3306, 25, 9090} {
			if IsOpaque(cfg, p, port) != IsOpaque(cfg, spods[k], port) || IsSkippedInbound(p, port) != IsSkippedInbound(spods[k], port) {
				t.Errorf("pod %s port %d: slim pod answers differently", k, port)
			}
		}
		k1, n1 := Owner(p)
		k2, n2 := Owner(spods[k])
		if k1 != k2 || n1 != n2 {
			t.Errorf("pod %s: Owner %s/%s, slim %s/%s", k, k1, n1, k2, n2)
		}
	}
}

func TestSlimDropsBulk(t *testing.T) {
	svc, sl, pods := slimFixture()
	ssvc, ssl, spods := slimAll(svc, sl, pods)
	p := spods["ns/a"]
	if p.ManagedFields != nil || p.Annotations["kubectl.kubernetes.io/last-applied-configuration"] != "" ||
		p.Labels["app.kubernetes.io/name"] != "" || len(p.Spec.Containers) != 0 || p.Status.Conditions != nil || p.Spec.NodeName != "" {
		t.Errorf("slim pod keeps bulk: %+v", p)
	}
	if p.Name != "a" || p.Namespace != "ns" || p.UID == "" || p.ResourceVersion == "" || p.Status.PodIP != "10.0.0.1" || len(p.OwnerReferences) != 1 {
		t.Errorf("slim pod lost identity fields: %+v", p)
	}
	if c := spods["ns/c"].Spec.Containers; len(c) != 1 || len(c[0].Ports) != 1 || c[0].Ports[0].Name != "http" || c[0].Image != "" {
		t.Errorf("slim pod with named opaque ports keeps containers %+v, want only the named port", c)
	}
	if ssvc.ManagedFields != nil || ssvc.Spec.Selector != nil || ssvc.Labels != nil || ssvc.Spec.ClusterIP != "10.96.0.10" {
		t.Errorf("slim service: %+v", ssvc)
	}
	s := ssl[0]
	if s.ManagedFields != nil || len(s.Labels) != 1 || len(s.Endpoints) != 4 || s.Endpoints[0].NodeName != nil || s.Endpoints[0].Conditions.Serving != nil {
		t.Errorf("slim slice: %+v", s)
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
	ssvc, ssl, spods := slimAll(svc, sl, pods)
	*ssl[0].Ports[0].Port = 1
	ssl[0].Endpoints[0].Addresses[0] = "1.1.1.1"
	ssl[0].Labels[LabelServiceName] = "x"
	spods["ns/a"].Labels[LabelControlPlaneNS] = "x"
	spods["ns/c"].Spec.Containers[0].Ports[0].ContainerPort = 1
	ssvc.Spec.Ports[0].Port = 1
	if *sl[0].Ports[0].Port != 8080 || sl[0].Endpoints[0].Addresses[0] != "10.0.0.1" || sl[0].Labels[LabelServiceName] != "web" ||
		pods["ns/a"].Labels[LabelControlPlaneNS] != "linkerd" || pods["ns/c"].Spec.Containers[0].Ports[0].ContainerPort != 8080 || svc.Spec.Ports[0].Port != 80 {
		t.Error("a change to a slim copy reached the original")
	}
}

// normalSlice returns a copy of es with empty lists and maps made nil (IsSlimEndpointSlice
// does not tell them apart).
func normalSlice(es *discoveryv1.EndpointSlice) *discoveryv1.EndpointSlice {
	c := es.DeepCopy()
	if len(c.Endpoints) == 0 {
		c.Endpoints = nil
	}
	if len(c.Ports) == 0 {
		c.Ports = nil
	}
	if len(c.Labels) == 0 {
		c.Labels = nil
	}
	for i := range c.Endpoints {
		if len(c.Endpoints[i].Addresses) == 0 {
			c.Endpoints[i].Addresses = nil
		}
	}
	return c
}

func FuzzIsSlimEndpointSlice(f *testing.F) {
	f.Add([]byte{}, byte(0))
	f.Add([]byte("an arbitrary but longer seed that exercises more of the choices made by fuzzWorld"), byte(3))
	f.Fuzz(func(t *testing.T, data []byte, extra byte) {
		_, _, sl, _ := fuzzWorld(data)
		for _, es := range sl {
			if es == nil {
				continue
			}
			// Some of what slim drops, chosen by extra.
			if extra&1 != 0 && len(es.Endpoints) > 0 {
				es.Endpoints[0].NodeName = ptr("n")
			}
			if extra&2 != 0 {
				es.Annotations = map[string]string{"a": "b"}
			}
			if extra&4 != 0 && len(es.Endpoints) > 0 && es.Endpoints[0].TargetRef != nil {
				es.Endpoints[0].TargetRef.UID = "u"
			}
			slim := SlimEndpointSlice(es)
			if !IsSlimEndpointSlice(slim) {
				t.Fatalf("a slim copy is not slim: %+v", slim)
			}
			if IsSlimEndpointSlice(es) && !reflect.DeepEqual(normalSlice(es), normalSlice(slim)) {
				t.Fatalf("IsSlimEndpointSlice says slim, but slimming changes it:\n%+v\n%+v", es, slim)
			}
		}
	})
}
