package translator

import (
	"maps"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The projection is what the destination keeps of a Service, an EndpointSlice and a Pod: what
// this package reads (AddressSet, HostAddressSet, IsOpaque, IsOpaqueService, IsSkippedInbound,
// Owner, IsExternalName), the identifying metadata, and the newest managedFields time, which
// the informer lag histograms read (internal/kube.NewestManagedTime) after the informers'
// transform has replaced the object by its projection. It is defined here once and used by
// every source: the Kubernetes source's informer transform (Project), the index for what any
// source delivers (ProjectService, SlimEndpointSlice), and the bench feed's decoder, whose
// output must equal SlimEndpointSlice of the full decoding. An EndpointSlice's projection is a
// type of its own (EndpointSlice, slice.go).
//
// For every input, AddressSet over projected objects equals AddressSet over the originals. A
// projected object is for this package: code that reads other fields (a Server's pod
// selector, say) must keep its own copy.
//
// The lists below are the definition: every field kept, as a JSON path ("[]" is every element
// of a list, "[k]" the entry k of a map). Every other field is dropped, and so is every other
// map entry. TestProjectionFields checks SlimX and IsSlimX against them field by field, over
// every field of the API types, so that a field a new Kubernetes version adds is dropped
// until it is listed here.
var (
	// serviceFields: the Service's port names, numbers and protocols (servicePortName,
	// IsOpaqueService), its type and external name (IsExternalName, Get's error) and its
	// internal traffic policy (View). Its cluster IPs are kept for GetProfile by IP, its
	// target ports for whoever looks Services up by address.
	serviceFields = []string{
		"kind", "apiVersion",
		"metadata.name", "metadata.namespace", "metadata.uid", "metadata.resourceVersion",
		"metadata.annotations[" + AnnotationOpaquePorts + "]",
		"metadata.managedFields[].manager", "metadata.managedFields[].operation", "metadata.managedFields[].time", // the newest entry only
		"spec.type", "spec.externalName", "spec.clusterIP", "spec.clusterIPs[]", "spec.internalTrafficPolicy",
		"spec.ports[].name", "spec.ports[].protocol", "spec.ports[].port", "spec.ports[].targetPort",
	}
	// sliceFields: of an IPv4 or IPv6 slice, its ready endpoints (conditions.ready unset or
	// true) with their zone hints (View); a slice of another address type keeps no
	// endpoints. The multicluster mirror's annotations give the identity and authority of a
	// gateway's endpoints, and its cluster label the target metric labels. The projection is
	// an EndpointSlice of this package (slice.go), which holds these fields in a compact
	// form: the addresses parsed, a Pod targetRef as the pod's name.
	sliceFields = []string{
		"kind", "apiVersion",
		"metadata.name", "metadata.namespace", "metadata.uid", "metadata.resourceVersion",
		"metadata.labels[" + LabelServiceName + "]", "metadata.labels[" + LabelRemoteClusterName + "]",
		"metadata.annotations[" + AnnotationRemoteGatewayIdentity + "]", "metadata.annotations[" + AnnotationRemoteServiceFQName + "]",
		"metadata.managedFields[].manager", "metadata.managedFields[].operation", "metadata.managedFields[].time", // the newest entry only
		"addressType",
		"ports[].name", "ports[].protocol", "ports[].port",
		"endpoints[].addresses[]", "endpoints[].hostname", "endpoints[].zone", // ready endpoints only
		"endpoints[].hints.forZones[].name", // endpoints with at least one zone hint only
		"endpoints[].targetRef.kind", "endpoints[].targetRef.namespace", "endpoints[].targetRef.name",
	}
	// podFields: the identity (service account), the labels (the mesh and metric labels, and
	// every other for Servers' pod selectors), the owner (Owner), the port annotations
	// (IsOpaque, IsSkippedInbound) and the named container ports (which the opaque-ports
	// annotation and Servers may name), with their numbers; the node (View) and what GetProfile
	// by IP reads: phase, pod IPs, host network and whether the pod is being deleted. Of the
	// containers' environments, the proxy container's inbound address only, as its port (the
	// opaque-transport port; ProxyInboundPort). Not its kind:
	// the projection is a Pod of this package (pod.go), which holds these fields in a compact
	// form (the addresses parsed, the controller reference as its kind and name, the named
	// ports without their containers, the newest managedFields time without its entry).
	podFields = []string{
		"metadata.name", "metadata.namespace", "metadata.uid", "metadata.resourceVersion",
		"metadata.deletionTimestamp",
		"metadata.labels[*]", // every label: a Server's pod selector may name any
		"metadata.annotations[" + AnnotationOpaquePorts + "]", "metadata.annotations[" + AnnotationSkipInboundPorts + "]",
		"metadata.ownerReferences[].kind", "metadata.ownerReferences[].name", "metadata.ownerReferences[].controller", // the controller reference (or the only one) only
		"metadata.managedFields[].time", // the newest one only
		"spec.serviceAccountName", "spec.nodeName", "spec.hostNetwork",
		"spec.initContainers[].ports[].name", "spec.initContainers[].ports[].containerPort", // named ports only; containers without one are dropped
		"spec.containers[].ports[].name", "spec.containers[].ports[].containerPort", // named ports only; containers without one are dropped
		// The proxy container's EnvInboundListenAddr, as its port (in whichever list it is):
		"spec.initContainers[].name", "spec.initContainers[].env[].name", "spec.initContainers[].env[].value",
		"spec.containers[].name", "spec.containers[].env[].name", "spec.containers[].env[].value",
		"status.phase", "status.podIP", "status.podIPs[].ip", // as the addresses they give (Pod.IPs)
	}
)

var (
	podAnnotations     = []string{AnnotationOpaquePorts, AnnotationSkipInboundPorts}
	sliceLabels        = []string{LabelRemoteClusterName} // the service name is EndpointSlice.Service
	sliceAnnotations   = []string{AnnotationRemoteGatewayIdentity, AnnotationRemoteServiceFQName}
	serviceAnnotations = []string{AnnotationOpaquePorts}
)

// allKeys, as the labels or annotations slimMeta keeps, keeps every entry.
var allKeys = []string{"*"}

// Project returns the projection of a *corev1.Pod, *corev1.Service or
// *discoveryv1.EndpointSlice (SlimPod, ProjectService, SlimEndpointSlice) and any other
// value as it is. It is idempotent: a projection is returned as it is, not copied again (a
// Pod's is a *Pod of this package, an EndpointSlice's a *EndpointSlice).
func Project(obj any) any {
	switch o := obj.(type) {
	case *corev1.Pod:
		return SlimPod(o)
	case *corev1.Service:
		return ProjectService(o)
	case *discoveryv1.EndpointSlice:
		return SlimEndpointSlice(o)
	}
	return obj
}

// ProjectService returns s itself when it is a projection already (IsSlimService), else
// SlimService(s).
func ProjectService(s *corev1.Service) *corev1.Service {
	if IsSlimService(s) {
		return s
	}
	return SlimService(s)
}

// The Slim functions return the projection of an object as a new object, always a copy. Nil
// in, nil out. The copies share only strings with their inputs; within a slim EndpointSlice,
// endpoints of the same zone share its *string.

// slimMeta keeps identity, the given labels and annotations, and the newest managedFields
// entry's time.
func slimMeta(m *metav1.ObjectMeta, labels, annotations []string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:            m.Name,
		Namespace:       m.Namespace,
		UID:             m.UID,
		ResourceVersion: m.ResourceVersion,
		Labels:          keep(m.Labels, labels),
		Annotations:     keep(m.Annotations, annotations),
		ManagedFields:   newestManaged(m.ManagedFields),
	}
}

// keep returns the entries of m with the given keys (every entry for allKeys), or nil when
// there are none.
func keep(m map[string]string, keys []string) map[string]string {
	if len(keys) == 1 && keys[0] == allKeys[0] {
		if len(m) == 0 {
			return nil
		}
		return maps.Clone(m)
	}
	var out map[string]string
	for _, k := range keys {
		if v, ok := m[k]; ok {
			if out == nil {
				out = make(map[string]string, len(keys))
			}
			out[k] = v
		}
	}
	return out
}

// managedTime is the projection of managedFields in one allocation: the entry and its time.
type managedTime struct {
	entry [1]metav1.ManagedFieldsEntry
	time  metav1.Time
}

// newestManaged returns the entry with the newest time (the first of equal ones) with only
// its manager, operation and time, or nil when no entry has a time.
func newestManaged(fs []metav1.ManagedFieldsEntry) []metav1.ManagedFieldsEntry {
	newest := newestEntry(fs)
	if newest == nil {
		return nil
	}
	op := newest.Operation
	switch op { // the constants rather than the decoder's copies of them
	case metav1.ManagedFieldsOperationApply:
		op = metav1.ManagedFieldsOperationApply
	case metav1.ManagedFieldsOperationUpdate:
		op = metav1.ManagedFieldsOperationUpdate
	}
	m := &managedTime{time: *newest.Time}
	m.entry[0] = metav1.ManagedFieldsEntry{Manager: newest.Manager, Operation: op, Time: &m.time}
	return m.entry[:]
}

// newestEntry returns the entry of fs with the newest time (the first of equal ones), or nil
// when no entry has a time.
func newestEntry(fs []metav1.ManagedFieldsEntry) *metav1.ManagedFieldsEntry {
	var newest *metav1.ManagedFieldsEntry
	for i := range fs {
		if f := &fs[i]; f.Time != nil && (newest == nil || newest.Time.Before(f.Time)) {
			newest = f
		}
	}
	return newest
}

func ready(ep *discoveryv1.Endpoint) bool {
	return ep.Conditions.Ready == nil || *ep.Conditions.Ready
}

// SlimService returns the projection of s (serviceFields).
func SlimService(s *corev1.Service) *corev1.Service {
	if s == nil {
		return nil
	}
	out := &corev1.Service{
		TypeMeta:   metav1.TypeMeta{Kind: s.Kind, APIVersion: s.APIVersion},
		ObjectMeta: slimMeta(&s.ObjectMeta, nil, serviceAnnotations),
	}
	out.Spec.Type = s.Spec.Type
	out.Spec.ExternalName = s.Spec.ExternalName
	out.Spec.InternalTrafficPolicy = clonePtr(s.Spec.InternalTrafficPolicy)
	out.Spec.ClusterIP = s.Spec.ClusterIP
	if len(s.Spec.ClusterIPs) > 0 {
		out.Spec.ClusterIPs = append([]string(nil), s.Spec.ClusterIPs...)
	}
	if len(s.Spec.Ports) > 0 {
		out.Spec.Ports = make([]corev1.ServicePort, len(s.Spec.Ports))
		for i, p := range s.Spec.Ports {
			out.Spec.Ports[i] = corev1.ServicePort{Name: p.Name, Protocol: p.Protocol, Port: p.Port, TargetPort: p.TargetPort}
		}
	}
	return out
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}
