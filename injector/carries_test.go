package injector

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// checkCarriesProxyPolicy checks a patched pod (FuzzAdmissionReview's): the policy controller
// reads the default inbound policy from the pod's annotation alone, so a pod given a proxy must
// carry the policy its proxy was given (LINKERD2_PROXY_INBOUND_DEFAULT_POLICY), or none when the
// proxy has the cluster default (want, the fuzz's namespace has no such annotation); and that
// policy is one of Linkerd's, so that a value that does not parse never reaches either; and
// a pod whose own value (in original, the object sent) does not parse gets deny.
func checkCarriesProxyPolicy(t *testing.T, original, patched []byte, clusterDefault string) {
	t.Helper()
	var pod, orig corev1.Pod
	if json.Unmarshal(patched, &pod) != nil || json.Unmarshal(original, &orig) != nil {
		return // an object that is no pod (the patch applied to what was sent)
	}
	var env string
	found := false
	for _, c := range slices.Concat(pod.Spec.InitContainers, pod.Spec.Containers) {
		if c.Name != ProxyContainerName {
			continue
		}
		for _, e := range c.Env {
			if e.Name == "LINKERD2_PROXY_INBOUND_DEFAULT_POLICY" {
				env, found = e.Value, true
			}
		}
	}
	if !found {
		return
	}
	valid := []string{"all-unauthenticated", "all-authenticated", "cluster-unauthenticated", "cluster-authenticated", "deny", "audit"}
	if !slices.Contains(valid, env) {
		t.Fatalf("the proxy's default inbound policy is %.60q", env)
	}
	if v, ok := orig.Annotations[AnnotationDefaultInboundPolicy]; ok && !slices.Contains(valid, strings.TrimSpace(v)) && env != FailClosedInboundPolicy {
		t.Fatalf("the pod's default inbound policy %.60q does not parse, and its proxy got %q, not deny", v, env)
	}
	want := clusterDefault
	if ann, ok := pod.Annotations[AnnotationDefaultInboundPolicy]; ok {
		want = strings.TrimSpace(ann)
	}
	if env != want {
		t.Fatalf("the proxy's default inbound policy is %q, the pod carries %.60q (the cluster's is %q)", env, want, clusterDefault)
	}
}

// TestRequireIdentityKeptWithWarning: a require-identity port list that does not parse (the
// pod's, or its namespace's) stays on the pod as written, for the policy controller to fail
// closed on (every port requires identity), and the review warns of it; a valid one does not.
func TestRequireIdentityKeptWithWarning(t *testing.T) {
	cfg := DefaultConfig()
	for _, c := range []struct {
		name, at string
		ns, pod  map[string]string
	}{
		{"the pod's", AtWorkload, nil, map[string]string{AnnotationRequireIdentityPorts: "8080,https"}},
		{"the namespace's", AtNamespace, map[string]string{AnnotationRequireIdentityPorts: "8080,https"}, nil},
		{"a valid one", "", map[string]string{AnnotationRequireIdentityPorts: "https"}, map[string]string{AnnotationRequireIdentityPorts: "8080, 9000-9001"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			anns := map[string]string{AnnotationInject: InjectEnabled}
			maps.Copy(anns, c.pod)
			pod := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Annotations: anns},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web"}}}}
			out := cfg.Review(Meta{Annotations: c.ns}, "apps", &pod.ObjectMeta, &pod.Spec, false)
			got := applyPatch(t, &pod, out.Mutation.Patch("", &pod.ObjectMeta, &pod.Spec))
			if c.at == "" {
				if len(out.Warnings) != 0 || got.Annotations[AnnotationRequireIdentityPorts] != "8080, 9000-9001" {
					t.Fatalf("warnings %v, annotation %q", Strings(out.Warnings), got.Annotations[AnnotationRequireIdentityPorts])
				}
				return
			}
			ws := Strings(out.Warnings)
			if len(ws) != 1 || !out.Warnings[0].Kept || out.Warnings[0].At != c.at ||
				!strings.Contains(ws[0], `proxy-require-identity-inbound-ports="8080,https" on the `+c.at+` does not parse`) ||
				!strings.HasSuffix(ws[0], "; every port requires identity") {
				t.Fatalf("warnings %q", ws)
			}
			if v := got.Annotations[AnnotationRequireIdentityPorts]; v != "8080,https" {
				t.Errorf("the pod carries %q, want the list as written", v)
			}
		})
	}
	// A warning stays within the 256 bytes the API server keeps of one, whatever the value.
	nasty := strings.Repeat("\x1e", 100) + "," + strings.Repeat("9", 100)
	for _, ws := range [][]Warning{requireIdentityWarnings(Meta{}, map[string]string{AnnotationRequireIdentityPorts: nasty}),
		requireIdentityWarnings(Meta{Annotations: map[string]string{AnnotationRequireIdentityPorts: "1," + nasty}}, nil)} {
		if s := Strings(ws); len(s) != 1 || len(s[0]) > 256 {
			t.Errorf("warnings %q: want one of at most 256 bytes", s)
		}
	}
}

// TestPatchSettlesIgnoredAnnotations: the policy controller and the destination read a pod's
// annotations alone, so the pod must carry what its proxy was given. A pod's ignored value is
// replaced by the namespace's valid one, or removed when the default applies; a namespace's
// ignored value is not copied; an ignored default-inbound-policy becomes deny.
func TestPatchSettlesIgnoredAnnotations(t *testing.T) {
	cfg := DefaultConfig()
	for _, c := range []struct {
		name    string
		ns, pod map[string]string
		want    map[string]string // annotation -> value on the patched pod; "" means absent
		wantEnv string            // LINKERD2_PROXY_INBOUND_DEFAULT_POLICY
	}{
		{"a pod's typo beside the namespace's deny is deny",
			map[string]string{AnnotationDefaultInboundPolicy: "deny"}, map[string]string{AnnotationDefaultInboundPolicy: "Deny"},
			map[string]string{AnnotationDefaultInboundPolicy: "deny"}, "deny"},
		{"a pod's valid value beside the namespace's typo stays",
			map[string]string{AnnotationDefaultInboundPolicy: "closed"}, map[string]string{AnnotationDefaultInboundPolicy: "all-authenticated"},
			map[string]string{AnnotationDefaultInboundPolicy: "all-authenticated"}, "all-authenticated"},
		{"the namespace's skip list in place of the pod's bad one",
			map[string]string{AnnotationSkipInboundPorts: "3306"}, map[string]string{AnnotationSkipInboundPorts: "3306;"},
			map[string]string{AnnotationSkipInboundPorts: "3306"}, "all-unauthenticated"},
		{"a bad list the default replaces is removed",
			nil, map[string]string{AnnotationSkipInboundPorts: "3306,mysql"},
			map[string]string{AnnotationSkipInboundPorts: ""}, "all-unauthenticated"},
		{"a namespace's bad value is not copied",
			map[string]string{AnnotationSkipInboundPorts: "3306;"}, nil,
			map[string]string{AnnotationSkipInboundPorts: ""}, "all-unauthenticated"},
		// A default-inbound-policy that does not parse fails closed, for the proxy and the
		// policy controller alike: the pod carries deny.
		{"a namespace's bad default policy is deny on the pod",
			map[string]string{AnnotationDefaultInboundPolicy: "closed"}, nil,
			map[string]string{AnnotationDefaultInboundPolicy: "deny"}, "deny"},
		{"a pod's bad default policy is deny, not the namespace's",
			map[string]string{AnnotationDefaultInboundPolicy: "all-unauthenticated"}, map[string]string{AnnotationDefaultInboundPolicy: "allow"},
			map[string]string{AnnotationDefaultInboundPolicy: "deny"}, "deny"},
		{"a pod's valid value stays",
			map[string]string{AnnotationDefaultInboundPolicy: "deny"}, map[string]string{AnnotationDefaultInboundPolicy: "all-authenticated"},
			map[string]string{AnnotationDefaultInboundPolicy: "all-authenticated"}, "all-authenticated"},
	} {
		t.Run(c.name, func(t *testing.T) {
			anns := map[string]string{AnnotationInject: InjectEnabled}
			maps.Copy(anns, c.pod)
			pod := corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: "web", Annotations: anns},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web"}}},
			}
			out := cfg.Review(Meta{Annotations: c.ns}, "apps", &pod.ObjectMeta, &pod.Spec, false)
			if !out.Decision.Inject {
				t.Fatalf("skipped: %+v", out.Decision)
			}
			got := applyPatch(t, &pod, out.Mutation.Patch("", &pod.ObjectMeta, &pod.Spec))
			for k, want := range c.want {
				if v, ok := got.Annotations[k]; v != want || ok != (want != "") {
					t.Errorf("%s = %q (present %v), want %q", k, v, ok, want)
				}
			}
			for _, e := range got.Spec.InitContainers[1].Env {
				if e.Name == "LINKERD2_PROXY_INBOUND_DEFAULT_POLICY" && e.Value != c.wantEnv {
					t.Errorf("the proxy's default policy %q, want %q", e.Value, c.wantEnv)
				}
			}
		})
	}
}
