package charttest_test

import (
	"context"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/meridian-mesh/meridian/internal/charttest"
)

// injectedProxy injects a pod through the running injector (admit) and runs it on a stand-in
// kubelet of the pod's namespace: its proxy, as the chart's injector writes it (meridian-proxy
// from the image, the LINKERD2_PROXY_* environment naming the control plane's Services, the
// projected identity token), gets its certificate from identity and turns ready beside the
// application. The stand-in's pods share the host's network namespace, so the pod runs with
// two changes: without linkerd-init (no iptables capture; injector/proxyinit applies its rules
// in a network namespace of its own), and with the proxy's listeners on the pod's IP rather
// than on every address.
func injectedProxy(t *testing.T, f *fixture, k *charttest.Kubelet) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	app := webNamespace(ctx, t, f)
	updateNamespace(ctx, t, f, app, func(ns *corev1.Namespace) { ns.Annotations = map[string]string{"linkerd.io/inject": "enabled"} })
	ready := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstr.FromInt32(9100)}}}
	live := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/live", Port: intstr.FromInt32(9100)}}}
	pod := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: app, Labels: map[string]string{"app": "web"},
			// The proxy as a regular container: the stand-in runs no init containers.
			Annotations: map[string]string{"config.linkerd.io/proxy-enable-native-sidecar": "false"}},
		Spec: corev1.PodSpec{ServiceAccountName: "web", EnableServiceLinks: ptr.To(false), Containers: []corev1.Container{{
			Name: "web", Image: "ghcr.io/meridian-mesh/meridian",
			Args:           []string{"demo", "app", "--pod", app + "/web", "--http", "$(POD_IP):8080", "--metrics-addr", "$(POD_IP):9100"},
			Env:            []corev1.EnvVar{{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}}},
			Ports:          []corev1.ContainerPort{{ContainerPort: 8080}},
			ReadinessProbe: ready, LivenessProbe: live,
		}}},
	}
	got := admit(t, f, k, pod)
	if len(got.Spec.InitContainers) != 1 || got.Spec.InitContainers[0].Name != "linkerd-init" ||
		len(got.Spec.Containers) != 2 || got.Spec.Containers[0].Name != "linkerd-proxy" {
		t.Fatalf("injected pod: init containers %v, containers %v; want [linkerd-init], [linkerd-proxy web]", names(got.Spec.InitContainers), names(got.Spec.Containers))
	}
	if init := got.Spec.InitContainers[0]; !strings.HasPrefix(init.Image, "ghcr.io/meridian-mesh/meridian-proxy-init:") ||
		!slices.Equal(init.Command, []string{"meridian", "proxy-init"}) {
		t.Errorf("linkerd-init runs %q in %s, want meridian proxy-init in the chart's proxy-init image", init.Command, init.Image)
	}
	got.Spec.InitContainers = nil
	// The API server cannot reach the webhook's Service (there is no kube-proxy): once admit
	// has injected the pod, its namespace opts out of the webhook (which the injector would
	// have taken as a reason to skip it).
	updateNamespace(ctx, t, f, app, func(ns *corev1.Namespace) {
		ns.Labels["config.linkerd.io/admission-webhooks"] = "disabled"
	})
	proxy := &got.Spec.Containers[0]
	for i, e := range proxy.Env {
		if strings.HasSuffix(e.Name, "_LISTEN_ADDR") {
			_, port, err := net.SplitHostPort(e.Value)
			if err != nil {
				t.Fatalf("%s=%q: %v", e.Name, e.Value, err)
			}
			proxy.Env[i].Value = "$(_pod_ips):" + port // one pod IP, defined earlier by the injector
		}
	}
	if _, err := f.env.Client.AppsV1().Deployments(app).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: got.Labels, Annotations: got.Annotations}, Spec: got.Spec},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ak := charttest.Start(t, charttest.Config{Env: f.env, Namespace: app, Binary: f.bin, ProxyBinary: charttest.ProxyBinary(t)})
	ak.Sync(t)
	ak.WaitReady(t, 2*time.Minute)
	if bad := ak.ProbeAll(); len(bad) > 0 {
		t.Fatalf("probes of the injected pod that do not answer 200:\n%s", strings.Join(bad, "\n"))
	}
}

// updateNamespace applies change to namespace ns.
func updateNamespace(ctx context.Context, t *testing.T, f *fixture, ns string, change func(*corev1.Namespace)) {
	t.Helper()
	obj, err := f.env.Client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if obj.Labels == nil {
		obj.Labels = map[string]string{}
	}
	change(obj)
	if _, err := f.env.Client.CoreV1().Namespaces().Update(ctx, obj, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func names(cs []corev1.Container) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Name
	}
	return out
}
