package injector

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestDecide(t *testing.T) {
	app := corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app"}}}
	withProxy := corev1.PodSpec{Containers: []corev1.Container{{Name: "app"}, {Name: ProxyContainerName}}}
	withNativeProxy := corev1.PodSpec{InitContainers: []corev1.Container{{Name: InitContainerName}}, Containers: []corev1.Container{{Name: "app"}}}
	hostNet := corev1.PodSpec{HostNetwork: true, Containers: []corev1.Container{{Name: "app"}}}
	ann := func(v string) map[string]string { return map[string]string{AnnotationInject: v} }
	nsAnn := func(v string) Meta { return Meta{Annotations: ann(v)} }

	cases := []struct {
		name      string
		namespace string
		ns        Meta
		labels    map[string]string
		pod       map[string]string
		spec      *corev1.PodSpec
		force     bool
		want      Decision
	}{
		{name: "nothing", want: Decision{Reason: ReasonAnnotationAbsent}},
		{name: "ns enabled", ns: nsAnn("enabled"), want: Decision{Inject: true, Mode: InjectEnabled, AnnotationAt: AtNamespace}},
		{name: "ns ingress", ns: nsAnn("ingress"), want: Decision{Inject: true, Mode: InjectIngress, AnnotationAt: AtNamespace}},
		{name: "pod enabled", pod: ann("enabled"), want: Decision{Inject: true, Mode: InjectEnabled, AnnotationAt: AtWorkload}},
		{name: "pod ingress", pod: ann("ingress"), want: Decision{Inject: true, Mode: InjectIngress, AnnotationAt: AtWorkload}},
		{name: "pod disabled overrides ns enabled", ns: nsAnn("enabled"), pod: ann("disabled"), want: Decision{Reason: ReasonDisableAnnotation, AnnotationAt: AtWorkload}},
		{name: "pod enabled overrides ns disabled", ns: nsAnn("disabled"), pod: ann("enabled"), want: Decision{Inject: true, Mode: InjectEnabled, AnnotationAt: AtWorkload}},
		{name: "ns disabled", ns: nsAnn("disabled"), want: Decision{Reason: ReasonDisableAnnotation, AnnotationAt: AtNamespace}},
		{name: "invalid at ns", ns: nsAnn("yes"), want: Decision{Reason: ReasonInvalidAtNamespace, AnnotationAt: AtNamespace}},
		{name: "empty at ns", ns: nsAnn(""), want: Decision{Reason: ReasonInvalidAtNamespace, AnnotationAt: AtNamespace}},
		// An invalid value on the pod is ignored: the namespace's applies (Linkerd skips).
		{name: "invalid at workload", ns: nsAnn("enabled"), pod: ann("Enabled"), want: Decision{Inject: true, Mode: InjectEnabled, AnnotationAt: AtNamespace}},
		{name: "empty at workload", ns: nsAnn("ingress"), pod: ann(""), want: Decision{Inject: true, Mode: InjectIngress, AnnotationAt: AtNamespace}},
		{name: "invalid at workload, ns disabled", ns: nsAnn("disabled"), pod: ann("yes"), want: Decision{Reason: ReasonDisableAnnotation, AnnotationAt: AtNamespace}},
		{name: "invalid at workload, nothing at ns", pod: ann("yes"), want: Decision{Reason: ReasonInvalidAtWorkload, AnnotationAt: AtWorkload}},
		{name: "invalid at both", ns: nsAnn("no"), pod: ann("yes"), want: Decision{Reason: ReasonInvalidAtWorkload, AnnotationAt: AtWorkload}},
		{name: "invalid at ns, pod disabled", ns: nsAnn("no"), pod: ann("disabled"), want: Decision{Reason: ReasonDisableAnnotation, AnnotationAt: AtWorkload}},
		{name: "forced invalid at workload", force: true, pod: ann("Enabled"), want: Decision{Inject: true, Mode: InjectEnabled}},
		{name: "valid pod over invalid ns", ns: nsAnn("bogus"), pod: ann("enabled"), want: Decision{Inject: true, Mode: InjectEnabled, AnnotationAt: AtWorkload}},
		{name: "host network", ns: nsAnn("enabled"), spec: &hostNet, want: Decision{Reason: ReasonHostNetwork}},
		{name: "proxy container present", pod: ann("enabled"), spec: &withProxy, want: Decision{Reason: ReasonSidecarExists}},
		{name: "native proxy present", pod: ann("enabled"), spec: &withNativeProxy, want: Decision{Reason: ReasonSidecarExists}},
		{name: "kube-system", namespace: "kube-system", ns: nsAnn("enabled"), want: Decision{Reason: ReasonKubeSystem}},
		{name: "webhooks disabled on ns", ns: Meta{Labels: map[string]string{LabelAdmissionWebhooks: "disabled"}, Annotations: ann("enabled")}, want: Decision{Reason: ReasonAdmissionWebhooksOff}},
		{name: "webhooks label other value", ns: Meta{Labels: map[string]string{LabelAdmissionWebhooks: "enabled"}, Annotations: ann("enabled")}, want: Decision{Inject: true, Mode: InjectEnabled, AnnotationAt: AtNamespace}},
		{name: "control plane component", labels: map[string]string{LabelControlPlaneComp: "destination"}, pod: ann("enabled"), want: Decision{Reason: ReasonControlPlaneComponent}},
		{name: "forced absent", force: true, want: Decision{Inject: true, Mode: InjectEnabled}},
		{name: "forced still honours disabled", force: true, pod: ann("disabled"), want: Decision{Reason: ReasonDisableAnnotation, AnnotationAt: AtWorkload}},
		{name: "forced host network", force: true, spec: &hostNet, want: Decision{Reason: ReasonHostNetwork}},
		{name: "nil spec", pod: ann("enabled"), spec: nil, want: Decision{Reason: ReasonInvalidPod}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			spec := tc.spec
			if spec == nil && tc.name != "nil spec" {
				spec = &app
			}
			ns := tc.namespace
			if ns == "" {
				ns = "apps"
			}
			got := Decide(tc.ns, Workload{Namespace: ns, Labels: tc.labels, Annotations: tc.pod, Spec: spec}, tc.force)
			if got != tc.want {
				t.Fatalf("Decide = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestResolveOverrides(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Proxy.CPURequest = "100m"
	ns := Meta{Annotations: map[string]string{
		AnnotationProxyCPURequest:   "200m",
		AnnotationProxyLogLevel:     "debug",
		AnnotationProxyMemoryLimit:  "256Mi",
		AnnotationSkipOutboundPorts: "3306",
	}}
	pod := map[string]string{
		AnnotationProxyCPURequest:      "300m",
		AnnotationProxyUID:             "3000",
		AnnotationProxyImage:           "example.com/proxy",
		AnnotationProxyVersionOverride: "v9",
		AnnotationNativeSidecar:        "false",
		AnnotationSkipInboundPorts:     "25, 8000-8010,25",
	}
	v, warns, err := cfg.Resolve(ns, pod)
	if err != nil || len(warns) != 0 {
		t.Fatal(err, warns)
	}
	if got := v.Resources.Requests.Cpu().String(); got != "300m" {
		t.Errorf("cpu request %s, want the pod's 300m", got)
	}
	if got := v.Resources.Limits.Memory().String(); got != "256Mi" {
		t.Errorf("memory limit %s, want the namespace's 256Mi", got)
	}
	if v.LogLevel != "debug" || v.UID != 3000 || v.NativeSidecar {
		t.Errorf("log %q uid %d native %v", v.LogLevel, v.UID, v.NativeSidecar)
	}
	// The proxy image's override leaves the capture's own image alone (as with Linkerd); the
	// version applies to both, which run one release's binaries.
	if v.Image != "example.com/proxy:v9" || v.InitImage != "ghcr.io/meridian-mesh/meridian-proxy-init:v9" {
		t.Errorf("images %q %q", v.Image, v.InitImage)
	}
	// With no init image of its own, the capture runs the proxy's, overridden or not.
	cfg.Proxy.InitImage = ""
	if v, _, err := cfg.Resolve(ns, pod); err != nil || v.Image != "example.com/proxy:v9" || v.InitImage != "example.com/proxy:v9" {
		t.Errorf("without an init image: images %q %q (%v)", v.Image, v.InitImage, err)
	}
	if got := v.SkipInbound; len(got) != 2 || got[0] != "25" || got[1] != "8000-8010" {
		t.Errorf("skip inbound %v", got)
	}
	if got := v.SkipOutbound; len(got) != 1 || got[0] != "3306" {
		t.Errorf("skip outbound %v", got)
	}
}

func TestImageRef(t *testing.T) {
	for _, tc := range []struct{ image, version, want string }{
		{"ghcr.io/meridian-mesh/meridian", "v1", "ghcr.io/meridian-mesh/meridian:v1"},
		{"localhost:5000/meridian", "v1", "localhost:5000/meridian:v1"},
		{"localhost:5000/meridian:dev", "v1", "localhost:5000/meridian:dev"},
		{"meridian@sha256:abc", "v1", "meridian@sha256:abc"},
		{"meridian", "", "meridian"},
	} {
		if got := imageRef(tc.image, tc.version); got != tc.want {
			t.Errorf("imageRef(%q, %q) = %q, want %q", tc.image, tc.version, got, tc.want)
		}
	}
}
