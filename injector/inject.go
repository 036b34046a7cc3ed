package injector

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meridian-mesh/meridian/internal/quote"
)

// Outcome is the result of reviewing one pod or pod template.
type Outcome struct {
	Decision Decision
	Owner    Owner
	// Values and Mutation are set when Decision.Inject is true.
	Values   Values
	Mutation Mutation
	// Detail explains a skip in words; it may be empty.
	Detail string
	// Warnings are the annotations that were ignored because they are invalid: injection
	// goes on without them (see Config.Resolve), and a skip never comes from them.
	Warnings []Warning
	// Notes are what else the operator should know of an injected pod, in words (a
	// container that runs as the proxy's user, whose traffic the capture lets out).
	Notes []string
}

// Review decides and, when injecting, builds the mutation for a pod template with metadata
// meta and spec in namespace namespace (whose metadata is ns). It does not modify its
// arguments. force is true for `meridian inject --manual`, where an absent
// linkerd.io/inject counts as enabled.
func (c *Config) Review(ns Meta, namespace string, meta *metav1.ObjectMeta, spec *corev1.PodSpec, force bool) Outcome {
	return c.ReviewOwned(ns, namespace, meta, spec, OwnerOf(meta), force)
}

// ReviewOwned is Review with the owner given rather than derived from the pod's owner
// references (a workload's pod template has none; its owner is the workload).
func (c *Config) ReviewOwned(ns Meta, namespace string, meta *metav1.ObjectMeta, spec *corev1.PodSpec, owner Owner, force bool) Outcome {
	w := Workload{Namespace: namespace, Labels: meta.Labels, Annotations: meta.Annotations, Spec: spec}
	out := Outcome{Owner: owner, Decision: Decide(ns, w, force)}
	out.Warnings = injectWarnings(ns, meta.Annotations)
	if !out.Decision.Inject {
		return out
	}
	v, warns, err := c.Resolve(ns, meta.Annotations)
	if err != nil { // the defaults are invalid: Config.Validate refuses such a Config
		out.Decision = Decision{Reason: ReasonInvalidProxyConfig, AnnotationAt: out.Decision.AnnotationAt}
		out.Detail = err.Error()
		return out
	}
	out.Warnings = append(out.Warnings, warns...)
	out.Values = v
	out.Mutation = c.Build(out.Decision, v, w, out.Owner)
	// The policy controller and the destination read these annotations from the pod alone:
	// the pod carries the value its proxy was given. A namespace's valid value is copied onto
	// a pod without one, or in place of the pod's own ignored value; an ignored value for
	// which the default applies is removed, so that no controller reads it its own way; an
	// ignored default-inbound-policy is replaced by the one its proxy got, deny.
	ignored := map[string]bool{}
	for _, w := range out.Warnings {
		ignored[w.At+"/"+w.Annotation] = true
	}
	for _, key := range NamespaceCopied {
		_, own := meta.Annotations[key]
		if own && !ignored[AtWorkload+"/"+key] {
			continue // the pod's own value applies
		}
		switch val, ok := ns.Annotations[key]; {
		case key == AnnotationDefaultInboundPolicy && (ignored[AtWorkload+"/"+key] || ignored[AtNamespace+"/"+key]):
			out.Mutation.Annotations[key] = v.DefaultInbound // failed closed (Resolve)
		case ok && !ignored[AtNamespace+"/"+key]:
			out.Mutation.Annotations[key] = val
		case own:
			out.Mutation.RemoveAnnotations = append(out.Mutation.RemoveAnnotations, key)
		}
	}
	out.Warnings = append(out.Warnings, requireIdentityWarnings(ns, meta.Annotations)...)
	out.Notes = proxyUserNotes(spec, v.UID)
	_, own := meta.Annotations[AnnotationOpaquePorts]
	if _, copied := out.Mutation.Annotations[AnnotationOpaquePorts]; !own && !copied {
		if ports := declaredOf(spec, c.Proxy.OpaquePorts); ports != "" {
			out.Mutation.Annotations[AnnotationOpaquePorts] = ports
		}
	}
	return out
}

// requireIdentityWarnings warns of a require-identity port list that does not parse (the
// pod's, else its namespace's, which the pod then carries): it is kept as written, and the
// policy controller, which fails closed on it, makes every port of the pod require identity.
func requireIdentityWarnings(ns Meta, pod map[string]string) []Warning {
	for _, src := range annotationSources(ns, pod) {
		raw, ok := src.anns[AnnotationRequireIdentityPorts]
		if !ok {
			continue
		}
		if _, err := ParsePortList(raw); err != nil {
			return []Warning{{Annotation: AnnotationRequireIdentityPorts, Value: raw, At: src.at, Reason: err.Error(), Kept: true,
				Fallback: "every port requires identity"}}
		}
		return nil
	}
	return nil
}

// declaredOf returns, comma-separated, the ports of ports that a container of spec declares
// (Linkerd's FilterPodOpaquePorts).
func declaredOf(spec *corev1.PodSpec, ports []uint16) string {
	var out []string
	for _, p := range ports {
		if slices.ContainsFunc(spec.Containers, func(c corev1.Container) bool {
			return slices.ContainsFunc(c.Ports, func(cp corev1.ContainerPort) bool { return cp.ContainerPort == int32(p) })
		}) {
			out = append(out, strconv.Itoa(int(p)))
		}
	}
	return strings.Join(out, ",")
}

// proxyUserNotes says which of spec's containers run as uid, the proxy's user: proxy-init's
// rules let that user's traffic out uncaptured (so that the proxy's own gets out), so theirs
// bypasses the proxy, with no mTLS and no policy. Linkerd's injector says nothing of it.
func proxyUserNotes(spec *corev1.PodSpec, uid int64) []string {
	var out []string
	podUID := int64(-1)
	if sc := spec.SecurityContext; sc != nil && sc.RunAsUser != nil {
		podUID = *sc.RunAsUser
	}
	for _, c := range spec.Containers {
		runs := podUID
		if c.SecurityContext != nil && c.SecurityContext.RunAsUser != nil {
			runs = *c.SecurityContext.RunAsUser
		}
		if runs == uid {
			out = append(out, fmt.Sprintf("container %s runs as user %d, the proxy's: its traffic is not captured (no mTLS, no policy); run it as another user, or set config.linkerd.io/proxy-uid",
				quote.Prefix(c.Name, 63), uid))
		}
	}
	return out
}
