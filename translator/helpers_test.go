package translator

import (
	"fmt"
	"maps"
	"strings"

	"github.com/meridian-mesh/meridian/snapshot"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func ptr[T any](v T) *T { return &v }

func service(ns, name string, ports ...corev1.ServicePort) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       corev1.ServiceSpec{Ports: ports},
	}
}

func sport(name string, port int32) corev1.ServicePort {
	return corev1.ServicePort{Name: name, Port: port, Protocol: corev1.ProtocolTCP}
}

func eport(name string, port int32) discoveryv1.EndpointPort {
	return discoveryv1.EndpointPort{Name: ptr(name), Port: ptr(port), Protocol: ptr(corev1.ProtocolTCP)}
}

func eslice(ns, name, svc string, at discoveryv1.AddressType, ports []discoveryv1.EndpointPort, eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{LabelServiceName: svc}},
		AddressType: at,
		Ports:       ports,
		Endpoints:   eps,
	}
}

// endpoint is a ready endpoint for pod (none when pod is "") with the addresses given.
func endpoint(pod string, addrs ...string) discoveryv1.Endpoint {
	e := discoveryv1.Endpoint{Addresses: addrs, Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)}}
	if pod != "" {
		e.TargetRef = &corev1.ObjectReference{Kind: "Pod", Name: pod}
	}
	return e
}

func withReady(e discoveryv1.Endpoint, r *bool) discoveryv1.Endpoint {
	e.Conditions.Ready = r
	return e
}

func withZone(e discoveryv1.Endpoint, z string) discoveryv1.Endpoint {
	e.Zone = &z
	return e
}

func withHostname(e discoveryv1.Endpoint, h string) discoveryv1.Endpoint {
	e.Hostname = &h
	return e
}

type podOpt func(*corev1.Pod)

func meshed(ns string) podOpt {
	return func(p *corev1.Pod) { p.Labels[LabelControlPlaneNS] = ns }
}

func annotate(k, v string) podOpt {
	return func(p *corev1.Pod) { p.Annotations[k] = v }
}

func label(k, v string) podOpt {
	return func(p *corev1.Pod) { p.Labels[k] = v }
}

func owned(kind, name string) podOpt {
	return func(p *corev1.Pod) {
		p.OwnerReferences = append(p.OwnerReferences, metav1.OwnerReference{Kind: kind, Name: name, Controller: ptr(true)})
	}
}

func sa(name string) podOpt { return func(p *corev1.Pod) { p.Spec.ServiceAccountName = name } }

func containerPort(name string, port int32) podOpt {
	return func(p *corev1.Pod) {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "app", Ports: []corev1.ContainerPort{{Name: name, ContainerPort: port}}})
	}
}

func pod(ns, name string, opts ...podOpt) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{}, Annotations: map[string]string{}}}
	p.Spec.ServiceAccountName = "sa-" + name
	for _, o := range opts {
		o(p)
	}
	return p
}

// podIndex holds pods as the API gives them; its lookup projects each, as a source delivers
// them.
type podIndex map[string]*corev1.Pod

func index(pods ...*corev1.Pod) podIndex {
	m := podIndex{}
	for _, p := range pods {
		m[p.Namespace+"/"+p.Name] = p
	}
	return m
}

func (m podIndex) lookup(ns, name string) *Pod { return SlimPod(m[ns+"/"+name]) }

// projected returns a lookup of the pods projected once, for benchmarks (lookup projects on
// every call).
func (m podIndex) projected() PodLookup {
	p := make(map[string]*Pod, len(m))
	for k, v := range m {
		p[k] = SlimPod(v)
	}
	return func(ns, name string) *Pod { return p[ns+"/"+name] }
}

// unslimPod returns the API object of a Pod projection: the fields it keeps, as the API
// gives them, its named ports in one container and one init container, its addresses as
// status.podIPs (the first also as status.podIP). SlimPod of it is p again.
func unslimPod(p *Pod) *corev1.Pod {
	if p == nil {
		return nil
	}
	out := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace(), UID: p.UID, ResourceVersion: p.ResourceVersion,
		Labels: maps.Clone(p.GetLabels()), Annotations: maps.Clone(p.GetAnnotations()), DeletionTimestamp: clonePtr(p.GetDeletionTimestamp()),
		OwnerReferences: p.GetOwnerReferences(), ManagedFields: p.GetManagedFields()}}
	out.Spec.ServiceAccountName = p.ServiceAccountName()
	out.Spec.NodeName = p.NodeName()
	out.Spec.HostNetwork = p.HostNetwork()
	var ports, initPorts []corev1.ContainerPort
	for _, np := range p.NamedPorts() {
		cp := corev1.ContainerPort{Name: np.Name(), ContainerPort: np.Port}
		if np.Init {
			initPorts = append(initPorts, cp)
		} else {
			ports = append(ports, cp)
		}
	}
	// The proxy's inbound port, as the environment of a proxy container in each list (as the
	// base object has it: ProxyInboundPort reads the first).
	var proxy corev1.Container
	if port := p.InboundPort(); port != 0 {
		proxy = corev1.Container{Name: ProxyContainerName, Env: []corev1.EnvVar{{Name: EnvInboundListenAddr, Value: fmt.Sprintf("[::]:%d", port)}}}
	}
	if initPorts != nil || proxy.Name != "" {
		c := proxy
		c.Ports = initPorts
		out.Spec.InitContainers = []corev1.Container{c}
	}
	if ports != nil || proxy.Name != "" {
		c := proxy
		c.Ports = ports
		out.Spec.Containers = []corev1.Container{c}
	}
	out.Status.Phase = p.Phase()
	for i, a := range p.IPs() {
		if i == 0 {
			out.Status.PodIP = a.String()
		}
		out.Status.PodIPs = append(out.Status.PodIPs, corev1.PodIP{IP: a.String()})
	}
	return out
}

// render prints an endpoint on one line for comparisons in tables.
func render(e *snapshot.Endpoint) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s", e.Addr)
	if e.PodName() != "" {
		fmt.Fprintf(&b, " pod=%s/%s", e.PodNamespace(), e.PodName())
	}
	if e.Hostname() != "" {
		fmt.Fprintf(&b, " host=%s", e.Hostname())
	}
	if e.Identity() != "" {
		fmt.Fprintf(&b, " id=%s", e.Identity())
	}
	if e.Hint != snapshot.HintNone {
		fmt.Fprintf(&b, " hint=%s", e.Hint)
	}
	if e.OpaqueTransportPort != 0 {
		fmt.Fprintf(&b, " otp=%d", e.OpaqueTransportPort)
	}
	if e.HTTP2 {
		b.WriteString(" h2c")
	}
	if e.Weight != DefaultWeight {
		fmt.Fprintf(&b, " weight=%d", e.Weight)
	}
	// zone_locality=unknown, which every endpoint of an address set has until View sets it, is
	// left out; one without it says so.
	var ls []string
	locality := false
	for l := range e.MetricLabels() { // as the wire has them: the pod label among them
		if l.Key == LabelKeyZoneLocality {
			locality = true
			if l.Value == ZoneUnknown {
				continue
			}
		}
		ls = append(ls, l.Key+"="+l.Value)
	}
	if len(ls) > 0 {
		b.WriteString(" [" + strings.Join(ls, ",") + "]")
	}
	if !locality {
		b.WriteString(" no-zone-locality")
	}
	if e.NodeName() != "" {
		fmt.Fprintf(&b, " node=%s", e.NodeName())
	}
	if len(e.ForZones()) > 0 {
		fmt.Fprintf(&b, " for-zones=%s", strings.Join(e.ForZones(), "+"))
	}
	if e.AuthorityOverride() != "" {
		fmt.Fprintf(&b, " authority=%s", e.AuthorityOverride())
	}
	return b.String()
}

func renderSet(s *snapshot.AddressSet) []string {
	out := []string{}
	for _, e := range s.Sorted() {
		out = append(out, render(e))
	}
	return out
}

// labelsStrictlySorted reports whether the keys are sorted and unique.
func labelsStrictlySorted(ls []snapshot.Label) bool {
	for i := 1; i < len(ls); i++ {
		if ls[i-1].Key >= ls[i].Key {
			return false
		}
	}
	return true
}

func metav1OwnerRef(kind, name string, controller bool) metav1.OwnerReference {
	return metav1.OwnerReference{Kind: kind, Name: name, Controller: ptr(controller)}
}

// slimSlices returns the projections of sl.
func slimSlices(sl []*discoveryv1.EndpointSlice) []*EndpointSlice {
	if sl == nil {
		return nil
	}
	out := make([]*EndpointSlice, len(sl))
	for i, es := range sl {
		out[i] = SlimEndpointSlice(es)
	}
	return out
}

// addressSet and hostSet are AddressSet and HostAddressSet of the projections of sl, as a
// source delivers them.
func addressSet(cfg Config, svc *corev1.Service, port uint32, sl []*discoveryv1.EndpointSlice, pods PodLookup) *snapshot.AddressSet {
	return AddressSet(cfg, svc, port, slimSlices(sl), pods)
}

func hostSet(cfg Config, svc *corev1.Service, port uint32, host string, sl []*discoveryv1.EndpointSlice, pods PodLookup) *snapshot.AddressSet {
	return HostAddressSet(cfg, svc, port, host, slimSlices(sl), pods)
}

// unslim returns the API object of a projection: an EndpointSlice that projects to es again,
// holding only what es holds (nil for nil).
func unslim(es *EndpointSlice) *discoveryv1.EndpointSlice {
	if es == nil {
		return nil
	}
	out := &discoveryv1.EndpointSlice{TypeMeta: es.TypeMeta, ObjectMeta: es.ObjectMeta, AddressType: es.AddressType, Ports: es.Ports}
	if es.Service != "" {
		out.Labels = maps.Clone(es.Labels)
		if out.Labels == nil {
			out.Labels = map[string]string{}
		}
		out.Labels[LabelServiceName] = es.Service
	}
	for i := range es.Endpoints {
		e := &es.Endpoints[i]
		ep := discoveryv1.Endpoint{}
		if z := e.ZoneName(); z != "" {
			ep.Zone = &z
		}
		for j := range e.Addrs() {
			ep.Addresses = append(ep.Addresses, e.AddrAt(es, j).String())
		}
		if h := e.Hostname(); h != "" {
			ep.Hostname = &h
		}
		if zs := e.ForZones(); zs != nil {
			ep.Hints = &discoveryv1.EndpointHints{}
			for _, z := range zs {
				ep.Hints.ForZones = append(ep.Hints.ForZones, discoveryv1.ForZone{Name: z})
			}
		}
		if e.Pod != "" {
			ep.TargetRef = &corev1.ObjectReference{Kind: "Pod", Namespace: e.PodNamespace(es), Name: e.Pod}
		}
		out.Endpoints = append(out.Endpoints, ep)
	}
	return out
}
