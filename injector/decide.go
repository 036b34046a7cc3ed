package injector

import (
	corev1 "k8s.io/api/core/v1"
)

// Decision says whether to inject a pod and why not when not.
type Decision struct {
	Inject bool
	// Reason is the skip reason (Reason* constants) when Inject is false, else "".
	Reason string
	// Mode is InjectEnabled or InjectIngress when Inject is true.
	Mode string
	// AnnotationAt says where the effective linkerd.io/inject was found: AtWorkload,
	// AtNamespace, or "" when neither carries it.
	AnnotationAt string
}

// Workload is what the decision reads about a pod or pod template.
type Workload struct {
	Namespace   string
	Labels      map[string]string
	Annotations map[string]string
	Spec        *corev1.PodSpec
}

// Decide applies Linkerd's injection rules, in this order: system and opted-out
// namespaces, control-plane components, host networking, an existing proxy, then the
// linkerd.io/inject annotation: the pod's if it is enabled, ingress or disabled, else the
// namespace's. A pod's invalid value is ignored (unlike Linkerd, which skips such a pod:
// only an explicit disabled opts a pod out of an injecting namespace); when neither gives a
// valid value the pod is skipped with the reason naming the invalid one. When force is true
// (`meridian inject`) an absent or invalid annotation counts as enabled; an explicit disabled
// still skips.
func Decide(ns Meta, w Workload, force bool) Decision {
	skip := func(reason, at string) Decision { return Decision{Reason: reason, AnnotationAt: at} }
	if w.Namespace == namespaceKubeSystem {
		return skip(ReasonKubeSystem, "")
	}
	if ns.Labels[LabelAdmissionWebhooks] == admissionWebhooksDisable {
		return skip(ReasonAdmissionWebhooksOff, "")
	}
	if _, ok := w.Labels[LabelControlPlaneComp]; ok {
		return skip(ReasonControlPlaneComponent, "")
	}
	if w.Spec == nil {
		return skip(ReasonInvalidPod, "")
	}
	if w.Spec.HostNetwork {
		return skip(ReasonHostNetwork, "")
	}
	if HasSidecar(w.Spec) {
		return skip(ReasonSidecarExists, "")
	}

	podValue, onPod := w.Annotations[AnnotationInject]
	nsValue, onNS := ns.Annotations[AnnotationInject]
	value, at := "", ""
	switch {
	case onPod && validInject(podValue):
		value, at = podValue, AtWorkload
	case onNS && validInject(nsValue):
		value, at = nsValue, AtNamespace
	}
	switch {
	case value == InjectDisabled:
		return skip(ReasonDisableAnnotation, at)
	case value != "":
		return Decision{Inject: true, Mode: value, AnnotationAt: at}
	case force:
		return Decision{Inject: true, Mode: InjectEnabled}
	case onPod:
		return skip(ReasonInvalidAtWorkload, AtWorkload)
	case onNS:
		return skip(ReasonInvalidAtNamespace, AtNamespace)
	}
	return skip(ReasonAnnotationAbsent, "")
}

func validInject(v string) bool {
	return v == InjectEnabled || v == InjectIngress || v == InjectDisabled
}

// injectWarnings reports the linkerd.io/inject values that Decide ignores.
func injectWarnings(ns Meta, pod map[string]string) []Warning {
	var out []Warning
	for _, src := range []struct {
		at   string
		anns map[string]string
	}{{AtWorkload, pod}, {AtNamespace, ns.Annotations}} {
		if v, ok := src.anns[AnnotationInject]; ok && !validInject(v) {
			w := Warning{Annotation: AnnotationInject, Value: v, At: src.at, Reason: "want enabled, ingress or disabled"}
			if v2, ok := ns.Annotations[AnnotationInject]; src.at == AtWorkload && ok && validInject(v2) {
				w.Fallback = "the namespace's value applies"
			} else {
				w.Fallback = "it counts as absent"
			}
			out = append(out, w)
		}
	}
	return out
}

// sidecarNames are containers whose presence means a mesh proxy is already there.
var sidecarNames = map[string]bool{
	ProxyContainerName: true, InitContainerName: true,
	"istio-proxy": true, "istio-init": true,
}

// HasSidecar reports whether spec already carries a mesh proxy or its init container.
func HasSidecar(spec *corev1.PodSpec) bool {
	for _, c := range spec.Containers {
		if sidecarNames[c.Name] {
			return true
		}
	}
	for _, c := range spec.InitContainers {
		if sidecarNames[c.Name] {
			return true
		}
	}
	return false
}
