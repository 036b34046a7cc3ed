package translator

import (
	"net/netip"
	"slices"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// EndpointSlice is the projection of a discovery.k8s.io/v1 EndpointSlice (sliceFields): what
// AddressSet reads of it, in a form of its own rather than the API type's. A
// discoveryv1.Endpoint is 96 bytes before its address string and target reference (another
// 112); an endpoint here is 40, with its address parsed, and most endpoints need no other
// allocation (the endpoints of a slice in one zone share their Rare part). Every replica
// caches every slice it owns in this form, and its sets are computed from it.
//
// The projection keeps the endpoints that can contribute an address: ready ones (conditions
// ready unset or true) with at least one address of the slice's family, and not those whose
// target reference is a Pod without a name (whose pod cannot be found, so AddressSet leaves
// them out). A slice of another address type than IPv4 and IPv6 keeps no endpoints. So
// AddressSet over projections equals AddressSet over the originals, as HostAddressSet's rules
// define it on the API type.
//
// It is a runtime.Object (the informers cache it) and a metav1.Object. Nothing in it is
// modified once it is made: its endpoints share Rare parts, and a set computed from it
// shares its endpoints' zone hints.
type EndpointSlice struct {
	metav1.TypeMeta
	// ObjectMeta is the slice's identity, its mirror cluster label (the only label kept in
	// Labels, which is nil without it), its mirror annotations, and its newest managedFields
	// time (slimMeta).
	metav1.ObjectMeta
	// Service is the Service the slice belongs to: its kubernetes.io/service-name label, kept
	// here rather than in a map of its own. Code that reads a slice's labels through
	// metav1.Object (GetLabels) does not find it there.
	Service     string
	AddressType discoveryv1.AddressType
	// Ports are the slice's ports, with their names, numbers and protocols only.
	Ports []discoveryv1.EndpointPort
	// Endpoints are the ready endpoints, in the slice's order.
	Endpoints []SliceEndpoint
}

// SliceEndpoint is one endpoint of an EndpointSlice projection.
type SliceEndpoint struct {
	// addr is the endpoint's first address that is valid of the slice's family (its further
	// ones are in Rare), in 16 bytes (an IPv4 address in its IPv4-mapped form, which the
	// slice's address type tells apart from an IPv6 one): Addr returns it.
	addr [16]byte
	// Pod is the name of the pod that the endpoint's targetRef names ("": the targetRef is
	// not a Pod, or there is none).
	Pod string
	// Rare holds the endpoint's zone and what few endpoints have (nil: none of it). The
	// endpoints of a slice with the same zone and zone hints and nothing else share one.
	Rare *SliceEndpointRare
}

// SliceEndpointRare is the part of a SliceEndpoint that many endpoints lack, or share.
type SliceEndpointRare struct {
	// Zone is the endpoint's zone ("": none).
	Zone string
	// Hostname is the endpoint's hostname ("": none).
	Hostname string
	// ForZones are the names of the endpoint's zone hints, sorted and distinct (nil: none).
	ForZones []string
	// PodNamespace is the namespace of the pod the targetRef names when it is not the slice's.
	PodNamespace string
	// More are the endpoint's further valid addresses, in order.
	More []netip.Addr
}

// Hostname is the endpoint's hostname ("": none).
func (e *SliceEndpoint) Hostname() string {
	if e.Rare == nil {
		return ""
	}
	return e.Rare.Hostname
}

// ZoneName is the endpoint's zone ("": none).
func (e *SliceEndpoint) ZoneName() string {
	if e.Rare == nil {
		return ""
	}
	return e.Rare.Zone
}

// ForZones are the names of the endpoint's zone hints, sorted and distinct (nil: none).
func (e *SliceEndpoint) ForZones() []string {
	if e.Rare == nil {
		return nil
	}
	return e.Rare.ForZones
}

// PodNamespace is the namespace of the endpoint's pod (meaningful when Pod is not empty): the
// targetRef's, or else the slice's.
func (e *SliceEndpoint) PodNamespace(es *EndpointSlice) string {
	if e.Rare != nil && e.Rare.PodNamespace != "" {
		return e.Rare.PodNamespace
	}
	return es.Namespace
}

// Addr returns the endpoint's first address; es is its slice.
func (e *SliceEndpoint) Addr(es *EndpointSlice) netip.Addr {
	a := netip.AddrFrom16(e.addr)
	if es.AddressType == discoveryv1.AddressTypeIPv4 {
		return a.Unmap()
	}
	return a
}

// Addrs returns the number of the endpoint's addresses.
func (e *SliceEndpoint) Addrs() int {
	if e.Rare == nil {
		return 1
	}
	return 1 + len(e.Rare.More)
}

// AddrAt returns the endpoint's address i (0 ≤ i < Addrs()); es is its slice.
func (e *SliceEndpoint) AddrAt(es *EndpointSlice, i int) netip.Addr {
	if i == 0 {
		return e.Addr(es)
	}
	return e.Rare.More[i-1]
}

// SlimEndpointSlice returns the projection of es, a new object sharing only strings with es.
// Nil in, nil out.
func SlimEndpointSlice(es *discoveryv1.EndpointSlice) *EndpointSlice {
	if es == nil {
		return nil
	}
	out := &EndpointSlice{
		TypeMeta:    metav1.TypeMeta{Kind: es.Kind, APIVersion: es.APIVersion},
		ObjectMeta:  slimMeta(&es.ObjectMeta, sliceLabels, sliceAnnotations),
		Service:     es.Labels[LabelServiceName],
		AddressType: es.AddressType,
		Ports:       SlimPorts(es.Ports),
	}
	if es.AddressType != discoveryv1.AddressTypeIPv4 && es.AddressType != discoveryv1.AddressTypeIPv6 {
		return out
	}
	n := 0
	for i := range es.Endpoints {
		if ep := &es.Endpoints[i]; ready(ep) && len(ep.Addresses) > 0 {
			n++
		}
	}
	if n == 0 {
		return out
	}
	b := SliceBuilder{AddressType: es.AddressType, Namespace: es.Namespace}
	out.Endpoints = make([]SliceEndpoint, 0, n)
	var f EndpointFields
	for i := range es.Endpoints {
		ep := &es.Endpoints[i]
		if !ready(ep) {
			continue
		}
		f.Addrs = f.Addrs[:0]
		for _, a := range ep.Addresses {
			if addr, ok := b.ParseAddr(a); ok {
				f.Addrs = append(f.Addrs, addr)
			}
		}
		f.Ref, f.RefKind, f.RefNamespace, f.RefName = ep.TargetRef != nil, "", "", ""
		if r := ep.TargetRef; r != nil {
			f.RefKind, f.RefNamespace, f.RefName = r.Kind, r.Namespace, r.Name
		}
		f.Zone, f.Hostname = ep.Zone, ""
		if ep.Hostname != nil {
			f.Hostname = *ep.Hostname
		}
		f.ForZones = HintZones(ep.Hints)
		if e, ok := b.Endpoint(&f); ok {
			out.Endpoints = append(out.Endpoints, e)
		}
	}
	if len(out.Endpoints) == 0 {
		out.Endpoints = nil
	}
	return out
}

// EndpointFields are what the projection reads of a ready endpoint.
type EndpointFields struct {
	// Addrs are its addresses that are valid of the slice's family (SliceBuilder.ParseAddr),
	// in order.
	Addrs []netip.Addr
	// Ref says whether it has a targetRef, of this kind, namespace and name.
	Ref                            bool
	RefKind, RefNamespace, RefName string
	Zone                           *string
	Hostname                       string
	// ForZones are the zones of its hints, as HintZones returns them.
	ForZones []string
}

// Endpoint returns the projection of the ready endpoint f, or false when the projection
// leaves it out: it has no valid address, its targetRef is a Pod without a name, or its
// targetRef is of another kind (an ExternalWorkload, whose mesh identity Meridian does not
// read, or a Node: served bare, a meshed workload would be reached in plaintext; Linkerd
// leaves out the kinds it does not serve). f is not kept (its Addrs may be reused), except
// its ForZones.
func (b *SliceBuilder) Endpoint(f *EndpointFields) (SliceEndpoint, bool) {
	if len(f.Addrs) == 0 {
		return SliceEndpoint{}, false // no address of the slice's family: it contributes nothing
	}
	if f.Ref && f.RefKind != "Pod" {
		return SliceEndpoint{}, false
	}
	e := SliceEndpoint{addr: f.Addrs[0].As16()}
	podNS := ""
	if f.Ref && f.RefKind == "Pod" {
		if f.RefName == "" {
			return SliceEndpoint{}, false // its pod cannot be found: AddressSet leaves it out
		}
		e.Pod = f.RefName
		if f.RefNamespace != b.Namespace {
			podNS = f.RefNamespace
		}
	}
	zone := ""
	if f.Zone != nil {
		zone = *f.Zone
	}
	if f.Hostname == "" && podNS == "" && len(f.Addrs) == 1 {
		e.Rare = b.shared(zone, f.ForZones)
		return e, true
	}
	e.Rare = NewSliceEndpointRare(zone, f.Hostname, f.ForZones, podNS, slices.Clone(f.Addrs[1:]))
	return e, true
}

// SlimPorts returns the projection of a slice's ports (names, numbers and protocols), nil
// when there are none.
func SlimPorts(ps []discoveryv1.EndpointPort) []discoveryv1.EndpointPort {
	if len(ps) == 0 {
		return nil
	}
	out := make([]discoveryv1.EndpointPort, len(ps))
	for i, p := range ps {
		out[i] = discoveryv1.EndpointPort{Name: clonePtr(p.Name), Port: clonePtr(p.Port), Protocol: clonePtr(p.Protocol)}
	}
	return out
}

// NewSliceEndpointRare returns the Rare of an endpoint with these values, nil when they are
// all empty. forZones must be sorted and distinct (HintZones).
func NewSliceEndpointRare(zone, hostname string, forZones []string, podNamespace string, more []netip.Addr) *SliceEndpointRare {
	if zone == "" && hostname == "" && len(forZones) == 0 && podNamespace == "" && len(more) == 0 {
		return nil
	}
	if len(more) == 0 {
		more = nil
	}
	return &SliceEndpointRare{Zone: zone, Hostname: hostname, ForZones: forZones, PodNamespace: podNamespace, More: more}
}

// HintZones returns the names of the zone hints of h, sorted and distinct, or nil when it has
// none.
func HintZones(h *discoveryv1.EndpointHints) []string {
	if h == nil || len(h.ForZones) == 0 {
		return nil
	}
	out := make([]string, 0, len(h.ForZones))
	for _, z := range h.ForZones {
		out = append(out, z.Name)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// SliceBuilder holds what the endpoints of one slice's projection share: the Rare parts of
// the endpoints that have only a zone and zone hints. The bench feed's decoder, which builds
// projections straight from the wire, uses it too.
type SliceBuilder struct {
	AddressType discoveryv1.AddressType
	Namespace   string
	rares       []*SliceEndpointRare // the first few distinct ones, up to maxSharedRares
}

// shared returns the Rare part of an endpoint with this zone and these zone hints and nothing
// else rare (nil when both are empty), the same one for the endpoints alike.
func (b *SliceBuilder) shared(zone string, forZones []string) *SliceEndpointRare {
	if zone == "" && len(forZones) == 0 {
		return nil
	}
	for _, r := range b.rares {
		if r.Zone == zone && slices.Equal(r.ForZones, forZones) {
			return r
		}
	}
	r := &SliceEndpointRare{Zone: zone, ForZones: forZones}
	if len(b.rares) < maxSharedRares {
		b.rares = append(b.rares, r)
	}
	return r
}

// ParseAddr parses an endpoint address of the builder's address type (false: it is not one).
func (b *SliceBuilder) ParseAddr(s string) (netip.Addr, bool) { return parseAddr(s, b.AddressType) }

// DeepCopyObject implements runtime.Object.
func (es *EndpointSlice) DeepCopyObject() runtime.Object { return es.DeepCopy() }

// DeepCopy returns a copy of es that shares nothing with it but strings (nil for nil).
func (es *EndpointSlice) DeepCopy() *EndpointSlice {
	if es == nil {
		return nil
	}
	out := &EndpointSlice{TypeMeta: es.TypeMeta, Service: es.Service, AddressType: es.AddressType, Ports: SlimPorts(es.Ports)}
	es.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	if es.Endpoints != nil {
		out.Endpoints = make([]SliceEndpoint, len(es.Endpoints))
		copies := map[*SliceEndpointRare]*SliceEndpointRare{} // shared parts stay shared
		for i, e := range es.Endpoints {
			if r := e.Rare; r != nil {
				c, ok := copies[r]
				if !ok {
					c = &SliceEndpointRare{Zone: r.Zone, Hostname: r.Hostname, ForZones: slices.Clone(r.ForZones), PodNamespace: r.PodNamespace, More: slices.Clone(r.More)}
					copies[r] = c
				}
				e.Rare = c
			}
			out.Endpoints[i] = e
		}
	}
	return out
}

// EndpointSliceList is a list of EndpointSlice projections, as a reflector lists them.
type EndpointSliceList struct {
	metav1.TypeMeta
	metav1.ListMeta
	Items []EndpointSlice
}

// DeepCopyObject implements runtime.Object.
func (l *EndpointSliceList) DeepCopyObject() runtime.Object {
	if l == nil {
		return nil
	}
	out := &EndpointSliceList{TypeMeta: l.TypeMeta}
	l.ListMeta.DeepCopyInto(&out.ListMeta)
	if l.Items != nil {
		out.Items = make([]EndpointSlice, len(l.Items))
		for i := range l.Items {
			out.Items[i] = *l.Items[i].DeepCopy()
		}
	}
	return out
}
