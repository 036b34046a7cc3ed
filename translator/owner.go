package translator

import (
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Owner returns the metric label key (the owner's kind, lower-cased) and value (its name) of
// the workload that owns pod, from the pod alone, as Linkerd does without an owner lookup: a
// ReplicaSet owner of a pod labelled pod-template-hash=H and named "<d>-H" is Deployment <d>;
// any other owner gives its own kind ("statefulset", "daemonset", "job", "replicaset", ...).
// The owner is the controller reference, or the only reference when none is marked
// controller. It returns "", "" when the pod has no such owner.
func Owner(pod *Pod) (kind, name string) {
	rkind, rname := pod.controller()
	if rkind == "" || rname == "" {
		return "", ""
	}
	if rkind == "ReplicaSet" {
		if h := pod.Label(LabelPodTemplateHash); h != "" {
			if n := rname; len(n) > len(h)+1 && n[len(n)-len(h)-1] == '-' && n[len(n)-len(h):] == h {
				return "deployment", n[:len(n)-len(h)-1]
			}
		}
		return "replicaset", rname
	}
	return lowerASCII(rkind), rname
}

func controllerRef(refs []metav1.OwnerReference) *metav1.OwnerReference {
	for i := range refs {
		if refs[i].Controller != nil && *refs[i].Controller {
			return &refs[i]
		}
	}
	if len(refs) == 1 {
		return &refs[0]
	}
	return nil
}

// lowerASCII lower-cases s, allocating only when s has an upper-case letter.
func lowerASCII(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 'A' && c <= 'Z' {
			return strings.ToLower(s)
		}
	}
	return s
}
