package translator

import (
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The Slim functions return a copy of an object that holds only what this package reads
// (AddressSet, HostAddressSet, IsOpaque, IsOpaqueService, IsSkippedInbound, Owner,
// IsExternalName), plus the identifying metadata (name, namespace, UID, resource version),
// so that a replica keeps little per object. For every input, AddressSet over slim objects equals AddressSet over the
// originals. A slim object is for this package: code that reads other fields (a Server's pod
// selector, say) must keep its own copy. Nil in, nil out. The copies share only strings with
// their inputs; within a slim EndpointSlice, endpoints of the same zone share its *string.

// slimMeta keeps identity and the given labels and annotations.
func slimMeta(m *metav1.ObjectMeta, labels, annotations []string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:            m.Name,
		Namespace:       m.Namespace,
		UID:             m.UID,
		ResourceVersion: m.ResourceVersion,
		Labels:          keep(m.Labels, labels),
		Annotations:     keep(m.Annotations, annotations),
	}
}

// keep returns the entries of m with the given keys, or nil when there are none.
func keep(m map[string]string, keys []string) map[string]string {
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

var (
	podLabels          = []string{LabelControlPlaneNS, LabelPodTemplateHash}
	podAnnotations     = []string{AnnotationOpaquePorts, AnnotationSkipInboundPorts}
	sliceLabels        = []string{LabelServiceName}
	serviceAnnotations = []string{AnnotationOpaquePorts}
)

// SlimPod keeps the pod's name, namespace, UID, resource version, the labels
// linkerd.io/control-plane-ns and pod-template-hash, the opaque-ports and skip-inbound-ports
// annotations, its owner references (kind, name, controller), its service account, its
// containers' named ports (name, number, protocol: opaque-ports may name them), and its phase
// and pod IPs.
func SlimPod(p *corev1.Pod) *corev1.Pod {
	if p == nil {
		return nil
	}
	out := &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{Kind: p.Kind, APIVersion: p.APIVersion},
		ObjectMeta: slimMeta(&p.ObjectMeta, podLabels, podAnnotations),
	}
	if ref := controllerRef(p.OwnerReferences); ref != nil {
		r := metav1.OwnerReference{APIVersion: ref.APIVersion, Kind: ref.Kind, Name: ref.Name, UID: ref.UID}
		if ref.Controller != nil {
			c := *ref.Controller
			r.Controller = &c
		}
		out.OwnerReferences = []metav1.OwnerReference{r}
	}
	out.Spec.ServiceAccountName = p.Spec.ServiceAccountName
	if _, ok := p.Annotations[AnnotationOpaquePorts]; ok {
		for i := range p.Spec.Containers {
			c := &p.Spec.Containers[i]
			var ports []corev1.ContainerPort
			for _, cp := range c.Ports {
				if cp.Name != "" {
					ports = append(ports, corev1.ContainerPort{Name: cp.Name, ContainerPort: cp.ContainerPort, Protocol: cp.Protocol})
				}
			}
			if ports != nil {
				out.Spec.Containers = append(out.Spec.Containers, corev1.Container{Name: c.Name, Ports: ports})
			}
		}
	}
	out.Status.Phase = p.Status.Phase
	out.Status.PodIP = p.Status.PodIP
	if len(p.Status.PodIPs) > 0 {
		out.Status.PodIPs = append([]corev1.PodIP(nil), p.Status.PodIPs...)
	}
	return out
}

// SlimEndpointSlice keeps the slice's name, namespace, UID, resource version, its
// kubernetes.io/service-name label, address type and ports, and of its endpoints only the
// ready ones (ready unset counts as ready) with their addresses, hostname, zone and targetRef
// (kind, namespace, name). A slice of address type FQDN keeps no endpoints.
func SlimEndpointSlice(es *discoveryv1.EndpointSlice) *discoveryv1.EndpointSlice {
	if es == nil {
		return nil
	}
	out := &discoveryv1.EndpointSlice{
		TypeMeta:    metav1.TypeMeta{Kind: es.Kind, APIVersion: es.APIVersion},
		ObjectMeta:  slimMeta(&es.ObjectMeta, sliceLabels, nil),
		AddressType: es.AddressType,
	}
	if len(es.Ports) > 0 {
		out.Ports = make([]discoveryv1.EndpointPort, len(es.Ports))
		for i, p := range es.Ports {
			out.Ports[i] = discoveryv1.EndpointPort{Name: clonePtr(p.Name), Port: clonePtr(p.Port), Protocol: clonePtr(p.Protocol)}
		}
	}
	if es.AddressType != discoveryv1.AddressTypeIPv4 && es.AddressType != discoveryv1.AddressTypeIPv6 {
		return out
	}
	// The endpoints' addresses and target references are carved from one array each, and
	// endpoints of the same zone share one copy of it: a few allocations per slice, not
	// several per endpoint. Count what they need first.
	n, nAddrs, nRefs := 0, 0, 0
	for i := range es.Endpoints {
		if ep := &es.Endpoints[i]; ready(ep) {
			n++
			nAddrs += len(ep.Addresses)
			if ep.TargetRef != nil {
				nRefs++
			}
		}
	}
	if n == 0 {
		return out
	}
	out.Endpoints = make([]discoveryv1.Endpoint, 0, n)
	addrs := make([]string, 0, nAddrs)
	var refs []corev1.ObjectReference
	if nRefs > 0 {
		refs = make([]corev1.ObjectReference, 0, nRefs)
	}
	var zones []*string // the distinct zones seen, up to a few
	zoneOf := func(z *string) *string {
		for _, p := range zones {
			if *p == *z {
				return p
			}
		}
		p := clonePtr(z)
		if len(zones) < 8 {
			zones = append(zones, p)
		}
		return p
	}
	for i := range es.Endpoints {
		ep := &es.Endpoints[i]
		if !ready(ep) {
			continue
		}
		e := discoveryv1.Endpoint{Hostname: clonePtr(ep.Hostname)}
		if len(ep.Addresses) > 0 {
			lo := len(addrs)
			addrs = append(addrs, ep.Addresses...)
			e.Addresses = addrs[lo:len(addrs):len(addrs)]
		}
		if ep.Zone != nil {
			e.Zone = zoneOf(ep.Zone)
		}
		if r := ep.TargetRef; r != nil {
			refs = append(refs, corev1.ObjectReference{Kind: r.Kind, Namespace: r.Namespace, Name: r.Name})
			e.TargetRef = &refs[len(refs)-1]
		}
		out.Endpoints = append(out.Endpoints, e)
	}
	return out
}

func ready(ep *discoveryv1.Endpoint) bool {
	return ep.Conditions.Ready == nil || *ep.Conditions.Ready
}

// SlimService keeps the Service's name, namespace, UID, resource version, opaque-ports
// annotation (IsOpaqueService), type, external name, cluster IPs and ports (name, protocol,
// port, target port).
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

// IsSlimEndpointSlice reports whether es holds nothing that SlimEndpointSlice would drop, so
// that a consumer may keep es itself instead of a slim copy (sources whose transform already
// slims objects, or that decode them slim, deliver such slices). It allocates nothing. A
// true answer means SlimEndpointSlice(es) equals es, except that empty lists may be nil.
func IsSlimEndpointSlice(es *discoveryv1.EndpointSlice) bool {
	if es == nil {
		return true
	}
	m := &es.ObjectMeta
	if m.GenerateName != "" || m.SelfLink != "" || m.Generation != 0 || !m.CreationTimestamp.IsZero() ||
		m.DeletionTimestamp != nil || m.DeletionGracePeriodSeconds != nil || len(m.Annotations) != 0 ||
		len(m.OwnerReferences) != 0 || len(m.Finalizers) != 0 || len(m.ManagedFields) != 0 {
		return false
	}
	for k := range m.Labels {
		if k != LabelServiceName {
			return false
		}
	}
	for i := range es.Ports {
		if es.Ports[i].AppProtocol != nil {
			return false
		}
	}
	if es.AddressType != discoveryv1.AddressTypeIPv4 && es.AddressType != discoveryv1.AddressTypeIPv6 {
		return len(es.Endpoints) == 0
	}
	for i := range es.Endpoints {
		ep := &es.Endpoints[i]
		if ep.Conditions != (discoveryv1.EndpointConditions{}) || ep.NodeName != nil || ep.Hints != nil || len(ep.DeprecatedTopology) != 0 {
			return false
		}
		if r := ep.TargetRef; r != nil && (r.UID != "" || r.APIVersion != "" || r.ResourceVersion != "" || r.FieldPath != "") {
			return false
		}
	}
	return true
}
