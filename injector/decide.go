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
// linkerd.io/inject annotation (the pod's if present, else the namespace's; anything but
// enabled, ingress or disabled is invalid and skips). When force is true (`meridian inject`)
// an absent annotation counts as enabled; an explicit disabled still skips.
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

	value, at := "", ""
	if v, ok := w.Annotations[AnnotationInject]; ok {
		value, at = v, AtWorkload
	} else if v, ok := ns.Annotations[AnnotationInject]; ok {
		value, at = v, AtNamespace
	}
	switch value {
	case InjectEnabled, InjectIngress:
		return Decision{Inject: true, Mode: value, AnnotationAt: at}
	case InjectDisabled:
		return skip(ReasonDisableAnnotation, at)
	case "":
		if at == "" {
			if force {
				return Decision{Inject: true, Mode: InjectEnabled}
			}
			return skip(ReasonAnnotationAbsent, "")
		}
	}
	if at == AtWorkload {
		return skip(ReasonInvalidAtWorkload, at)
	}
	return skip(ReasonInvalidAtNamespace, at)
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
