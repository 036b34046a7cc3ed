package snapshot

import (
	"iter"
	"net/netip"
	"slices"
	"unique"
)

// ProtocolHint tells the proxy how it may speak to an endpoint.
type ProtocolHint uint8

const (
	HintNone   ProtocolHint = iota // unmeshed: no hint
	HintH2                         // meshed: the proxy may upgrade HTTP/1 to HTTP/2
	HintOpaque                     // meshed opaque port: TCP through the inbound proxy port
)

func (h ProtocolHint) String() string {
	switch h {
	case HintH2:
		return "h2"
	case HintOpaque:
		return "opaque"
	default:
		return ""
	}
}

// Label is one metric label of an endpoint.
type Label struct{ Key, Value string }

// LabelPod is the metric label that names an endpoint's pod. An endpoint holds it as its Pod,
// not in its Labels, so that the endpoints of the pods of one workload can share one Labels
// slice; MetricLabels gives the labels with it.
const LabelPod = "pod"

// Endpoint is one address of a service port as the Destination API serves it.
// An Endpoint is immutable once it is part of a published AddressSet.
//
// A set holds one per address, so its size is the snapshots' memory: its fields are ordered
// so that the small ones share one word, what few endpoints have is behind one pointer
// (Rare), and the pod's namespace and node, which repeat across pods, are one shared handle
// (Place), and the identity, which the pods of a service account share, one interned handle
// (ID): 104 bytes in all on 64-bit machines.
type Endpoint struct {
	Addr   netip.AddrPort
	Weight uint32
	// OpaqueTransportPort is the proxy's inbound port for the transport header (0: none): set
	// on opaque ports, and on every meshed port in the transport-header mode.
	OpaqueTransportPort uint16
	Hint                ProtocolHint
	// HTTP2 asks the client to use HTTP/2 client parameters (keep-alive) to meshed endpoints.
	HTTP2 bool
	// Labels are the per-address metric labels but LabelPod (which is Pod: MetricLabels
	// gives them all), sorted by key. Endpoints may share one slice (its capacity is then
	// its length): never write into it.
	Labels []Label
	// ID is the endpoint's TLS identity (a DNS-like name), interned; the zero Handle when the
	// pod is not meshed or the port skips the inbound proxy. Read it through Identity, set it
	// through SetIdentity.
	ID unique.Handle[string]
	// Pod names the pod behind the address ("": none, or unknown); its bytes are those of
	// the pod's or slice's name, not a copy.
	Pod string
	// Place is the pod's namespace and node (the zero Handle: neither), canonical
	// (MakePodPlace, SetPod): the endpoints of the pods of a namespace on one node share it.
	// Views of a Service with internalTrafficPolicy Local keep the endpoints on the client's
	// node. Read it through PodNamespace, NodeName and PodRef.
	Place unique.Handle[PodPlace]
	// Rare holds what few endpoints have: nil when they have none of it. Endpoints may
	// share one (never write into it); read it through Hostname, ForZones and
	// AuthorityOverride.
	Rare *Rare
}

// Rare is the part of an Endpoint that most endpoints lack.
type Rare struct {
	// Hostname is the EndpointSlice hostname of the address (for <hostname>.<svc>... lookups).
	Hostname string
	// ForZones are the zones of the EndpointSlice's hints.forZones (nil: no hints), sorted:
	// views for a client in a zone keep the endpoints hinted for it.
	ForZones []string
	// AuthorityOverride is the authority a client sends to the address instead of the one it
	// asked for ("" for none): a multicluster gateway's mirror of a remote service.
	AuthorityOverride string
}

// NewRare returns the Rare of an endpoint with these values, nil when they are all empty.
func NewRare(hostname string, forZones []string, authorityOverride string) *Rare {
	if hostname == "" && len(forZones) == 0 && authorityOverride == "" {
		return nil
	}
	return &Rare{Hostname: hostname, ForZones: forZones, AuthorityOverride: authorityOverride}
}

// Equal reports whether r and o carry the same values (nil is all empty).
func (r *Rare) Equal(o *Rare) bool {
	if r == o {
		return true
	}
	var zero Rare
	if r == nil {
		r = &zero
	}
	if o == nil {
		o = &zero
	}
	return r.Hostname == o.Hostname && r.AuthorityOverride == o.AuthorityOverride && slices.Equal(r.ForZones, o.ForZones)
}

// Hostname returns the EndpointSlice hostname of the address, or "".
func (e *Endpoint) Hostname() string {
	if e.Rare == nil {
		return ""
	}
	return e.Rare.Hostname
}

// ForZones returns the zones of the slice's hints.forZones (sorted; nil: no hints). Shared:
// do not modify.
func (e *Endpoint) ForZones() []string {
	if e.Rare == nil {
		return nil
	}
	return e.Rare.ForZones
}

// AuthorityOverride returns the authority a client sends to the address instead of the one
// it asked for, or "".
func (e *Endpoint) AuthorityOverride() string {
	if e.Rare == nil {
		return ""
	}
	return e.Rare.AuthorityOverride
}

// Equal reports whether e and o carry the same information.
func (e *Endpoint) Equal(o *Endpoint) bool {
	if e == o {
		return true
	}
	if e == nil || o == nil {
		return false
	}
	return e.Addr == o.Addr && e.Weight == o.Weight && e.ID == o.ID &&
		e.Hint == o.Hint && e.OpaqueTransportPort == o.OpaqueTransportPort && e.HTTP2 == o.HTTP2 &&
		e.Pod == o.Pod && e.Place == o.Place &&
		e.Rare.Equal(o.Rare) && slices.Equal(e.Labels, o.Labels)
}

// Identity is the endpoint's TLS identity ("": none).
func (e *Endpoint) Identity() string {
	if e.ID == (unique.Handle[string]{}) {
		return ""
	}
	return e.ID.Value()
}

// SetIdentity sets the endpoint's TLS identity ("": none).
func (e *Endpoint) SetIdentity(id string) {
	if id == "" {
		e.ID = unique.Handle[string]{}
		return
	}
	e.ID = unique.Make(id)
}

// MetricLabels yields the endpoint's metric labels in key order: Labels, and LabelPod with
// the value Pod when Pod is set.
func (e *Endpoint) MetricLabels() iter.Seq[Label] {
	return func(yield func(Label) bool) {
		pod := e.Pod != ""
		for _, l := range e.Labels {
			if pod && l.Key > LabelPod {
				if !yield(Label{Key: LabelPod, Value: e.Pod}) {
					return
				}
				pod = false
			}
			if !yield(l) {
				return
			}
		}
		if pod {
			yield(Label{Key: LabelPod, Value: e.Pod})
		}
	}
}

// Label returns the value of metric label k, or "".
func (e *Endpoint) Label(k string) string {
	if k == LabelPod {
		return e.Pod
	}
	for _, l := range e.Labels {
		if l.Key == k {
			return l.Value
		}
	}
	return ""
}

// AddressSet is the full state of one service port. It is immutable once published: a writer
// that wants a change builds a new AddressSet (copy-on-write) and publishes that.
type AddressSet struct {
	// Exists is false when the Service does not exist (deleted, or not yet created).
	Exists bool
	// Labels are the set-level metric labels (service, namespace), sorted by key.
	Labels []Label
	// LocalTrafficPolicy is set when the Service has internalTrafficPolicy Local: a client
	// is served the endpoints on its own node only.
	LocalTrafficPolicy bool
	// Unresolved counts the addresses left out because what they name is not known yet (a
	// pod the source has not delivered); translator.AddressSetReusing computes the next set
	// afresh rather than from this one while there are any. It is not part of what a client
	// is sent.
	Unresolved int32
	// Endpoints are sorted by address, each address once (SortEndpoints makes them so). A
	// sorted slice rather than a map: 8 bytes an address instead of about 50, in order for
	// every stream and diff without sorting. It must not be altered after publication.
	Endpoints []*Endpoint
}

// Len returns the number of endpoints.
func (s *AddressSet) Len() int {
	if s == nil {
		return 0
	}
	return len(s.Endpoints)
}

// Lookup returns the endpoint at address a, or nil (also for a nil set).
func (s *AddressSet) Lookup(a netip.AddrPort) *Endpoint {
	if s == nil {
		return nil
	}
	if i, ok := s.index(a); ok {
		return s.Endpoints[i]
	}
	return nil
}

// index returns the position of address a in s.Endpoints, and whether it is there.
func (s *AddressSet) index(a netip.AddrPort) (int, bool) {
	return slices.BinarySearchFunc(s.Endpoints, a, func(e *Endpoint, a netip.AddrPort) int { return e.Addr.Compare(a) })
}

// Sorted returns the endpoints ordered by address: a new slice the caller may change (the
// endpoints are shared). Reading s.Endpoints needs no copy.
func (s *AddressSet) Sorted() []*Endpoint {
	if s == nil {
		return nil
	}
	return slices.Clone(s.Endpoints)
}

// SortEndpoints orders eps by address in place and drops the later endpoints of an address
// that appears more than once (the first one given wins), and returns the result, a prefix of
// eps: what AddressSet.Endpoints holds.
func SortEndpoints(eps []*Endpoint) []*Endpoint {
	slices.SortStableFunc(eps, func(a, b *Endpoint) int { return a.Addr.Compare(b.Addr) })
	return slices.CompactFunc(eps, func(a, b *Endpoint) bool { return a.Addr == b.Addr })
}

// Equal reports whether two sets carry the same information.
func (s *AddressSet) Equal(o *AddressSet) bool {
	if s == o {
		return true
	}
	if s == nil || o == nil {
		return false
	}
	if s.Exists != o.Exists || s.LocalTrafficPolicy != o.LocalTrafficPolicy || !slices.Equal(s.Labels, o.Labels) || len(s.Endpoints) != len(o.Endpoints) {
		return false
	}
	for i, e := range s.Endpoints {
		if !e.Equal(o.Endpoints[i]) {
			return false
		}
	}
	return true
}
