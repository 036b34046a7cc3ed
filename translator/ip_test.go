package translator

import (
	"errors"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestParseIPAuthority(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string // "" for not an IP authority
	}{
		{"10.0.0.1", "10.0.0.1:80"},
		{"10.0.0.1:8080", "10.0.0.1:8080"},
		{"[fd00::1]:8080", "[fd00::1]:8080"},
		{"[fd00::1]", "[fd00::1]:80"},
		{"fd00::1", "[fd00::1]:80"},
		{"[::ffff:10.0.0.1]:80", "10.0.0.1:80"}, // IPv4-mapped: the IPv4 address
		{"10.0.0.1:0", ""},
		{"10.0.0.1:65536", ""},
		{"[fe80::1%eth0]:80", ""},
		{"fe80::1%eth0", ""},
		{"web.shop.svc.cluster.local:80", ""},
		{"10.256.0.2", ""},
		{"", ""},
	} {
		got, ok := ParseIPAuthority(tc.in)
		if (tc.want == "") == ok || (ok && got.String() != tc.want) {
			t.Errorf("ParseIPAuthority(%q) = %v, %v; want %q", tc.in, got, ok, tc.want)
		}
	}
}

// FuzzParseIPAuthority checks that ParseIPAuthority accepts exactly the paths ParseAuthority
// refuses as IP addresses (but those with a bad port or a zone), and gives back what it read.
func FuzzParseIPAuthority(f *testing.F) {
	for _, s := range []string{"10.0.0.1", "10.0.0.1:80", "[fd00::1]:80", "[fd00::1]", "fd00::1", "[fe80::1%a]:1", "1.2.3.4:0", "::ffff:1.2.3.4", "[::]:65535"} {
		f.Add(s)
	}
	cfg := DefaultConfig()
	f.Fuzz(func(t *testing.T, path string) {
		ap, ok := ParseIPAuthority(path)
		_, err := ParseAuthority(cfg, path)
		if ok && !errors.Is(err, ErrIPAddress) {
			t.Fatalf("%q: an IP authority %v that ParseAuthority does not call one: %v", path, ap, err)
		}
		if !ok {
			return
		}
		if ap.Port() == 0 || ap.Addr().Zone() != "" || ap.Addr().Is4In6() {
			t.Fatalf("%q gives %v", path, ap)
		}
		if again, ok := ParseIPAuthority(ap.String()); !ok || again != ap {
			t.Fatalf("%q gives %v, whose text gives %v, %v", path, ap, again, ok)
		}
	})
}

func TestPodIPsAndClusterIPs(t *testing.T) {
	running := func(opts ...podOpt) *corev1.Pod {
		p := pod("ns", "p", opts...)
		p.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1", PodIPs: []corev1.PodIP{{IP: "10.0.0.1"}, {IP: "fd00::1"}, {IP: "bad"}}}
		return p
	}
	now := metav1.Now()
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want int
	}{
		{"running", running(), 2},
		{"pending", func() *corev1.Pod { p := running(); p.Status.Phase = corev1.PodPending; return p }(), 2},
		{"succeeded", func() *corev1.Pod { p := running(); p.Status.Phase = corev1.PodSucceeded; return p }(), 0},
		{"failed", func() *corev1.Pod { p := running(); p.Status.Phase = corev1.PodFailed; return p }(), 0},
		{"deleting", func() *corev1.Pod { p := running(); p.DeletionTimestamp = &now; return p }(), 0},
		{"host network", func() *corev1.Pod { p := running(); p.Spec.HostNetwork = true; return p }(), 0},
		{"podIP only", func() *corev1.Pod { p := running(); p.Status.PodIPs = nil; return p }(), 1},
		{"nil", nil, 0},
	} {
		got := PodIPs(SlimPod(tc.pod))
		if len(got) != tc.want {
			t.Errorf("%s: PodIPs = %v, want %d", tc.name, got, tc.want)
		}
		if direct := NetworkIPs(tc.pod); !slices.Equal(direct, got) {
			t.Errorf("%s: NetworkIPs = %v, PodIPs of the projection %v", tc.name, direct, got)
		}
	}
	svc := service("ns", "s")
	svc.Spec.ClusterIP, svc.Spec.ClusterIPs = "10.96.0.1", []string{"10.96.0.1", "fd00::88"}
	if got := ClusterIPs(svc); len(got) != 2 || got[1] != netip.MustParseAddr("fd00::88") {
		t.Errorf("ClusterIPs = %v", got)
	}
	svc.Spec.ClusterIP, svc.Spec.ClusterIPs = corev1.ClusterIPNone, []string{corev1.ClusterIPNone}
	if got := ClusterIPs(svc); len(got) != 0 {
		t.Errorf("ClusterIPs of a headless Service = %v", got)
	}
}

// TestPodEndpoint follows linkerd2's TestGetProfiles cases for pod IPs
// (controller/api/destination/server_test.go) at the translation: a running meshed pod, an
// unmeshed one, a pending one, no pod, a skipped inbound port, and opaque by the annotation,
// the defaults and a Server.
func TestPodEndpoint(t *testing.T) {
	cfg := DefaultConfig()
	cfg.TrustDomain = "trust.domain"
	runningPod := func(name string, opts ...podOpt) *corev1.Pod {
		p := pod("ns", name, opts...)
		p.Spec.ServiceAccountName = ""
		p.Status.Phase = corev1.PodRunning
		return p
	}
	ap := func(port int) netip.AddrPort { return netip.MustParseAddrPort("172.17.0.12:" + strconv.Itoa(port)) }
	opaqueSrv, _ := ProjectServer(&ServerObject{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s"},
		Spec: ServerSpec{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "policy-test"}}, Port: ptr(intstr.FromInt32(80)), ProxyProtocol: "opaque"}})
	for _, tc := range []struct {
		name   string
		pod    *corev1.Pod
		port   int
		want   string
		opaque bool
	}{
		{"meshed", runningPod("name1-1", meshed("linkerd")), 8989,
			"172.17.0.12:8989 pod=ns/name1-1 id=default.ns.serviceaccount.identity.linkerd.trust.domain hint=h2 h2c [control_plane_ns=linkerd,namespace=ns,pod=name1-1,serviceaccount=default] no-zone-locality", false},
		{"unmeshed on an opaque port", runningPod("name2"), 3306, "172.17.0.12:3306 pod=ns/name2 [namespace=ns,pod=name2,serviceaccount=default] no-zone-locality", true},
		{"pending", func() *corev1.Pod {
			p := runningPod("name1-20", meshed("linkerd"))
			p.Status.Phase = corev1.PodPending
			return p
		}(), 4191,
			"172.17.0.12:4191 no-zone-locality", false},
		{"no pod", nil, 1234, "172.17.0.12:1234 no-zone-locality", false},
		{"no pod, default opaque port", nil, 3306, "172.17.0.12:3306 no-zone-locality", true},
		{"skipped inbound port", runningPod("name5", meshed("linkerd"), annotate(AnnotationSkipInboundPorts, "24224")), 24224,
			"172.17.0.12:24224 pod=ns/name5 [control_plane_ns=linkerd,namespace=ns,pod=name5,serviceaccount=default] no-zone-locality", false},
		{"opaque by annotation", runningPod("name3", meshed("linkerd"), annotate(AnnotationOpaquePorts, "4242")), 4242,
			"172.17.0.12:4242 pod=ns/name3 id=default.ns.serviceaccount.identity.linkerd.trust.domain hint=opaque otp=4143 h2c [control_plane_ns=linkerd,namespace=ns,pod=name3,serviceaccount=default] no-zone-locality", true},
		{"opaque by a Server", runningPod("policy-test", meshed("linkerd"), label("app", "policy-test")), 80,
			"172.17.0.12:80 pod=ns/policy-test id=default.ns.serviceaccount.identity.linkerd.trust.domain hint=opaque otp=4143 h2c [control_plane_ns=linkerd,namespace=ns,pod=policy-test,serviceaccount=default] no-zone-locality", true},
	} {
		got := PodEndpoint(cfg, SlimPod(tc.pod), ap(tc.port), []*Server{opaqueSrv})
		if r := render(got.Endpoint); r != tc.want || got.Opaque != tc.opaque {
			t.Errorf("%s:\n got %s opaque=%v\nwant %s opaque=%v", tc.name, r, got.Opaque, tc.want, tc.opaque)
		}
	}
}

// TestServerOpaque follows linkerd2's Server cases (server_test.go's testOpaque,
// endpoints_watcher_test.go's TestServerCannotSetOpaqueProtocolForPodsInOtherNamespaces): a
// Server selects a pod's port by number or by container port name (an init container's too,
// for native sidecars), in its own namespace only, and only opaque ones make it opaque.
func TestServerOpaque(t *testing.T) {
	srv := func(ns string, port intstr.IntOrString, protocol string, sel *metav1.LabelSelector) *Server {
		s, err := ProjectServer(&ServerObject{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "s"},
			Spec: ServerSpec{PodSelector: sel, Port: &port, ProxyProtocol: protocol}})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	app := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "native"}}
	p := pod("ns", "native", label("app", "native"))
	p.Spec.InitContainers = []corev1.Container{{Name: "app", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 80}}}}
	for _, tc := range []struct {
		name string
		s    *Server
		port uint32
		want bool
	}{
		{"by number", srv("ns", intstr.FromInt32(80), "opaque", app), 80, true},
		{"another port", srv("ns", intstr.FromInt32(80), "opaque", app), 8080, false},
		{"by an init container's port name", srv("ns", intstr.FromString("http"), "opaque", app), 80, true},
		{"a name of another port", srv("ns", intstr.FromString("admin"), "opaque", app), 80, false},
		{"another namespace", srv("server-ns", intstr.FromInt32(80), "opaque", app), 80, false},
		{"not selected", srv("ns", intstr.FromInt32(80), "opaque", &metav1.LabelSelector{MatchLabels: map[string]string{"app": "FOOBAR"}}), 80, false},
		{"not opaque", srv("ns", intstr.FromInt32(80), "HTTP/1", app), 80, false},
		{"everything", srv("ns", intstr.FromInt32(80), "opaque", &metav1.LabelSelector{}), 80, true},
	} {
		if got := ServerOpaque([]*Server{tc.s}, SlimPod(p), tc.port); got != tc.want {
			t.Errorf("%s: ServerOpaque = %v, want %v", tc.name, got, tc.want)
		}
	}
	// A Server of external workloads is valid and selects no pod.
	ext, err := ProjectServer(&ServerObject{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "ext"},
		Spec: ServerSpec{ExternalWorkloadSelector: app, Port: ptr(intstr.FromInt32(80)), ProxyProtocol: "opaque"}})
	if err != nil || ServerOpaque([]*Server{ext}, SlimPod(p), 80) {
		t.Errorf("Server of external workloads: %+v, %v; want no error and no selection", ext, err)
	}
	// An access policy that is none of Linkerd's decides no opacity: as Linkerd's destination
	// (whose CRD leaves the field free), the port is opaque.
	freePolicy, err := ProjectServer(&ServerObject{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "allow"},
		Spec: ServerSpec{PodSelector: app, Port: ptr(intstr.FromInt32(80)), ProxyProtocol: "opaque", AccessPolicy: "allow"}})
	if err != nil || !ServerOpaque([]*Server{freePolicy}, SlimPod(p), 80) {
		t.Errorf("Server with accessPolicy allow: %+v, %v; want it valid and opaque", freePolicy, err)
	}
	// An invalid Server (as the policy controller judges it, serverspec.Check, or with
	// a selector that does not parse) has a Problem naming the field and selects nothing.
	opaque80 := func(f func(*ServerObject)) *ServerObject {
		o := &ServerObject{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "bad"},
			Spec: ServerSpec{PodSelector: app, Port: ptr(intstr.FromInt32(80)), ProxyProtocol: "opaque"}}
		f(o)
		return o
	}
	for _, tc := range []struct {
		name, field string
		o           *ServerObject
	}{
		{"no selector", "exactly one of podSelector and externalWorkloadSelector", opaque80(func(o *ServerObject) { o.Spec.PodSelector = nil })},
		{"both selectors", "exactly one of podSelector and externalWorkloadSelector", opaque80(func(o *ServerObject) { o.Spec.ExternalWorkloadSelector = app })},
		{"a selector that does not parse", "spec.podSelector", opaque80(func(o *ServerObject) {
			o.Spec.PodSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "In"}}}
		})},
		{"no port", "spec.port", opaque80(func(o *ServerObject) { o.Spec.Port = nil })},
		{"an unknown protocol", "spec.proxyProtocol", opaque80(func(o *ServerObject) { o.Spec.ProxyProtocol = "Opaque" })},
		{"an access policy in v1beta2", "spec.accessPolicy", opaque80(func(o *ServerObject) {
			o.APIVersion, o.Spec.AccessPolicy = "policy.linkerd.io/v1beta2", "deny"
		})},
	} {
		bad, err := ProjectServer(tc.o)
		if err == nil || bad == nil || !strings.Contains(bad.Problem, tc.field) || ServerOpaque([]*Server{bad}, SlimPod(p), 80) {
			t.Errorf("%s: %+v, %v; want a Problem naming %s and no selection", tc.name, bad, err, tc.field)
		}
	}
}
