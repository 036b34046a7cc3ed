package injector

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestWebhookInjectsDespiteBadAnnotations sends, over HTTPS, pods of an injecting namespace
// with the annotations that used to leave them unmeshed silently: each is injected with the
// default for the bad field, and the problem is in the response's warnings, in a warn log
// and in the metrics.
func TestWebhookInjectsDespiteBadAnnotations(t *testing.T) {
	core, logs := observer.New(zapcore.WarnLevel)
	s := startWebhookWithLog(t, StaticNamespaces{
		"apps": {Annotations: map[string]string{AnnotationInject: InjectEnabled}},
		"odd":  {Annotations: map[string]string{AnnotationInject: InjectEnabled, AnnotationProxyUID: "nobody"}},
	}, zap.New(core))
	cases := []struct {
		name, namespace string
		ann             map[string]string
		warning         string
		check           func(proxy, init corev1.Container) bool
	}{
		{"cpu request garbage", "apps", map[string]string{AnnotationProxyCPURequest: "garbage"},
			`config.linkerd.io/proxy-cpu-request="garbage" on the workload is ignored: not a quantity`,
			func(proxy, _ corev1.Container) bool { return proxy.Resources.Requests.Cpu().IsZero() }},
		{"uid -5", "apps", map[string]string{AnnotationProxyUID: "-5"},
			`config.linkerd.io/proxy-uid="-5" on the workload is ignored: want an integer id in [0, 2147483647]; the default applies`,
			func(proxy, _ corev1.Container) bool {
				return proxy.SecurityContext != nil && proxy.SecurityContext.RunAsUser != nil && *proxy.SecurityContext.RunAsUser == 2102
			}},
		{"a log level the proxy cannot start with", "apps", map[string]string{AnnotationProxyLogLevel: "linkerd=inf"},
			`config.linkerd.io/proxy-log-level="linkerd=inf" on the workload is ignored: the proxy's log level must be`,
			func(proxy, _ corev1.Container) bool {
				for _, e := range proxy.Env {
					if e.Name == "LINKERD2_PROXY_LOG" {
						return e.Value == "warn,linkerd=info"
					}
				}
				return false
			}},
		{"skip-inbound-ports 1-99999", "apps", map[string]string{AnnotationSkipInboundPorts: "1-99999"},
			`config.linkerd.io/skip-inbound-ports="1-99999" on the workload is ignored: "1-99999": want a port in [1, 65535]`,
			func(_, init corev1.Container) bool { return !strings.Contains(strings.Join(init.Args, " "), "99999") }},
		{"a typo in linkerd.io/inject", "apps", map[string]string{AnnotationInject: "Enabled"},
			`linkerd.io/inject="Enabled" on the workload is ignored: want enabled, ingress or disabled; the namespace's value applies`,
			func(corev1.Container, corev1.Container) bool { return true }},
		{"a bad namespace annotation", "odd", nil,
			`config.linkerd.io/proxy-uid="nobody" on the namespace is ignored`,
			func(proxy, _ corev1.Container) bool { return *proxy.SecurityContext.RunAsUser == 2102 }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: "web", Annotations: c.ann},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app"}}},
			}
			body := podReview(t, pod, admissionv1.Create)
			body = []byte(strings.Replace(string(body), `"namespace":"apps"`, `"namespace":"`+c.namespace+`"`, 1))
			resp := s.review(t, body)
			if resp.Patch == nil {
				t.Fatalf("not injected: %+v", resp.Result)
			}
			var ops []PatchOp
			if err := json.Unmarshal(resp.Patch, &ops); err != nil {
				t.Fatal(err)
			}
			got := applyPatch(t, pod, ops)
			checkInjectedBasics(t, got)
			if !c.check(got.Spec.InitContainers[1], got.Spec.InitContainers[0]) {
				t.Errorf("the bad field did not get its default: %+v", got.Spec.InitContainers)
			}
			if len(resp.Warnings) != 1 || !strings.Contains(resp.Warnings[0], c.warning) || len(resp.Warnings[0]) > 256 {
				t.Errorf("warnings %q, want one containing %q", resp.Warnings, c.warning)
			}
			if n := logs.FilterMessage("ignored invalid annotations").FilterField(zap.Strings("warnings", resp.Warnings)).Len(); n != 1 {
				t.Errorf("%d warn logs with the warning, want 1; logs %v", n, logs.All())
			}
		})
	}
	series := gatherSeries(t, s, "proxy_inject_admission_responses_total")
	for _, c := range []struct{ label, value string }{{"proxy_cpu_request", "invalid"}, {"proxy_uid", "invalid"}, {"skip_inbound_ports", "invalid"}} {
		found := false
		for _, l := range series {
			if l[c.label] == c.value && l["skip"] == "false" {
				found = true
			}
		}
		if !found {
			t.Errorf("no injected-response series with %s=%q: %v", c.label, c.value, series)
		}
	}
	ignored := gatherSeries(t, s, "proxy_inject_ignored_annotations_total")
	for _, want := range []string{AnnotationProxyCPURequest + "/workload", AnnotationProxyUID + "/workload", AnnotationSkipInboundPorts + "/workload",
		AnnotationInject + "/workload", AnnotationProxyUID + "/namespace"} {
		found := false
		for _, l := range ignored {
			found = found || l["annotation"]+"/"+l["at"] == want
		}
		if !found {
			t.Errorf("proxy_inject_ignored_annotations_total has no %s series: %v", want, ignored)
		}
	}
}

// TestMetricLabelsAreBounded sends 300 pods whose annotations all differ in value (valid and
// invalid values alike): the admission counters keep a handful of series, not one per value.
func TestMetricLabelsAreBounded(t *testing.T) {
	s := startWebhook(t, StaticNamespaces{"apps": {Annotations: map[string]string{AnnotationInject: InjectEnabled}}})
	const n = 300
	for i := 0; i < n; i++ {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("web-%d", i), Annotations: map[string]string{
				AnnotationProxyCPURequest:      fmt.Sprintf("%dm", i+1),
				AnnotationProxyImage:           fmt.Sprintf("registry.example/proxy-%d", i),
				AnnotationProxyUID:             fmt.Sprintf("uid-%d", i),
				AnnotationProxyLogLevel:        strings.Repeat("x", i+1),
				AnnotationSkipOutboundPorts:    fmt.Sprintf("%d", 1000+i),
				AnnotationProxyVersionOverride: fmt.Sprintf("v%d\xff", i),
			}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app"}}},
		}
		if resp := s.review(t, podReview(t, pod, admissionv1.Create)); resp.Patch == nil {
			t.Fatalf("pod %d not injected: %+v", i, resp.Result)
		}
	}
	for _, name := range []string{"proxy_inject_admission_requests_total", "proxy_inject_admission_responses_total", "proxy_inject_ignored_annotations_total"} {
		series := gatherSeries(t, s, name)
		if len(series) == 0 || len(series) > 2 {
			t.Errorf("%s has %d series after %d pods with distinct annotation values, want 1 or 2: %v", name, len(series), n, series)
		}
		for _, l := range series {
			for k, v := range l {
				if strings.HasPrefix(k, "proxy_") && v != "" && v != annotationSet && v != annotationInvalid {
					t.Errorf("%s label %s=%q: not from the closed set", name, k, v)
				}
			}
		}
	}
}

// gatherSeries returns the label sets of metric name in s's registry.
func gatherSeries(t *testing.T, s *webhookServer, name string) []map[string]string {
	t.Helper()
	mfs, err := s.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]string
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, lp := range m.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			out = append(out, l)
		}
	}
	return out
}
