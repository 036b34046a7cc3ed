package injector

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
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
