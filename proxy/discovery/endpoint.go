package discovery

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"

	pb "github.com/linkerd/linkerd2-proxy-api/go/destination"

	"github.com/meridian-mesh/meridian/internal/destclient"
	"github.com/meridian-mesh/meridian/internal/wire"
)

// DefaultWeight is the weight of an endpoint the destination sends without one (Linkerd's).
const DefaultWeight = 10000

// convertEndpoint turns one address of the destination into an Endpoint: weight 0 becomes
// DefaultWeight, the identity is tls_identity.dns_like_identity.name, the hint h2 or opaque,
// the opaque transport port protocol_hint.opaque_transport.inbound_port, and the labels the
// set's labels (setLabels) merged with the address's own, which win. An address that does
// not parse, port 0, or an opaque transport port outside 1..65535 is an error.
func convertEndpoint(a *pb.WeightedAddr, setLabels map[string]string) (Endpoint, error) {
	ap, err := wire.ToAddrPort(a.GetAddr())
	if err != nil {
		return Endpoint{}, fmt.Errorf("endpoint address: %w", err)
	}
	if ap.Port() == 0 {
		return Endpoint{}, fmt.Errorf("endpoint %s: port 0", ap.Addr())
	}
	e := Endpoint{
		Addr:     ap,
		Weight:   a.GetWeight(),
		Identity: a.GetTlsIdentity().GetDnsLikeIdentity().GetName(),
		Labels:   mergeLabels(setLabels, a.GetMetricLabels()),
	}
	if id := a.GetTlsIdentity(); id != nil && e.Identity == "" {
		// A URI-like (SPIFFE) identity, as Linkerd sends for an ExternalWorkload, or an
		// empty one. The proxy verifies DNS-like identities only: named as it is, the
		// endpoint's handshake fails (no DNS name of a certificate matches it), where with
		// no identity it would be reached in plaintext.
		e.Identity = id.GetUriLikeIdentity().GetUri()
		if e.Identity == "" {
			e.Identity = unverifiableIdentity
		}
	}
	if e.Weight == 0 {
		e.Weight = DefaultWeight
	}
	hint := a.GetProtocolHint()
	switch hint.GetProtocol().(type) {
	case *pb.ProtocolHint_H2_:
		e.Hint = HintH2
	case *pb.ProtocolHint_Opaque_:
		e.Hint = HintOpaque
	}
	if ot := hint.GetOpaqueTransport(); ot != nil {
		p := ot.GetInboundPort()
		if p == 0 || p > 65535 {
			return Endpoint{}, fmt.Errorf("endpoint %s: opaque transport port %d out of range", ap, p)
		}
		e.OpaqueTransportPort = uint16(p)
	}
	return e, nil
}

// unverifiableIdentity is the identity of an endpoint whose TLS identity names none: no
// certificate verifies it.
const unverifiableIdentity = "unverifiable-identity.invalid"

// mergeLabels returns set's labels with own's on top. It returns one of them as it is when
// the other is empty: the maps are shared (never modified) between endpoints and messages.
func mergeLabels(set, own map[string]string) map[string]string {
	switch {
	case len(own) == 0:
		return set
	case len(set) == 0:
		return own
	}
	m := make(map[string]string, len(set)+len(own))
	maps.Copy(m, set)
	maps.Copy(m, own)
	return m
}

// equalEndpoint reports whether two endpoints say the same thing.
func equalEndpoint(a, b Endpoint) bool {
	return a.Addr == b.Addr && a.Weight == b.Weight && a.Identity == b.Identity && a.Hint == b.Hint &&
		a.OpaqueTransportPort == b.OpaqueTransportPort && maps.Equal(a.Labels, b.Labels)
}

func compareAddr(a, b Endpoint) int { return a.Addr.Compare(b.Addr) }

// convertAdd converts the addresses of an Add, sorted by address; of an address listed twice
// the last is kept. An address that does not convert is left out (never used, so never
// reached without the identity it may have had), as linkerd2-proxy's resolver leaves it
// out: bad is the first such problem.
func convertAdd(set *pb.WeightedAddrSet) (eps []Endpoint, bad error) {
	out := make([]Endpoint, 0, len(set.GetAddrs()))
	for _, a := range set.GetAddrs() {
		e, err := convertEndpoint(a, set.GetMetricLabels())
		if err != nil {
			bad = cmp.Or(bad, fmt.Errorf("add: %w", err))
			continue
		}
		out = append(out, e)
	}
	slices.SortStableFunc(out, compareAddr)
	return destclient.DedupeLast(out, compareAddr), bad
}

// endpointSet is what a target holds of its Get streams: the sorted endpoints and whether the
// service exists. It is pure (no I/O, no goroutines) and not safe for concurrent use. Its
// endpoint slice is shared with published snapshots and never modified in place.
type endpointSet struct {
	resolved bool // something was learnt (an Add, NoEndpoints or NotFound)
	exists   bool
	eps      []Endpoint // sorted by address, unique
	// fresh says the next update is the first of a new stream: its full state. An Add then
	// replaces the set, and a Remove is ignored (Linkerd's proxy does the same).
	fresh bool
}

// restart notes that a new stream starts.
func (s *endpointSet) restart() { s.fresh = true }

// errUnknownUpdate is what apply says of an Update whose oneof this client does not know.
var errUnknownUpdate = errors.New("update of unknown kind, skipped")

// apply applies one update and reports whether the state changed. What it cannot use is
// skipped, as linkerd2-proxy's resolver skips it, and said in skipped: an address that does
// not convert (left out of an Add or a Remove), an update of unknown kind (a newer
// destination's). The stream goes on: refusing the message would only bring it back on the
// next stream, and the target would never resolve. A Remove of an address the set does not
// hold removes nothing.
func (s *endpointSet) apply(u *pb.Update) (changed bool, skipped error) {
	switch x := u.GetUpdate().(type) {
	case *pb.Update_Add:
		add, bad := convertAdd(x.Add)
		if !s.fresh {
			add = destclient.MergeSorted(s.eps, add, compareAddr)
		}
		return s.set(add, true), bad
	case *pb.Update_Remove:
		if s.fresh {
			return false, nil
		}
		next, bad := s.without(x.Remove)
		return s.set(next, s.exists), bad
	case *pb.Update_NoEndpoints:
		return s.set(nil, x.NoEndpoints.GetExists()), nil
	default:
		return false, errUnknownUpdate
	}
}

// notFound records that the destination does not know the service: it does not exist and
// has no endpoints.
func (s *endpointSet) notFound() bool { return s.set(nil, false) }

// without returns the endpoints without those rm names (a new slice, or s.eps unchanged).
func (s *endpointSet) without(rm *pb.AddrSet) (_ []Endpoint, bad error) {
	drop := make([]bool, len(s.eps))
	dropped := 0
	for _, a := range rm.GetAddrs() {
		ap, err := wire.ToAddrPort(a)
		if err != nil {
			bad = cmp.Or(bad, fmt.Errorf("remove: endpoint address: %w", err))
			continue
		}
		i, ok := slices.BinarySearchFunc(s.eps, ap, func(e Endpoint, t netip.AddrPort) int { return e.Addr.Compare(t) })
		if ok && !drop[i] {
			drop[i] = true
			dropped++
		}
	}
	if dropped == 0 {
		return s.eps, bad
	}
	out := make([]Endpoint, 0, len(s.eps)-dropped)
	for i, e := range s.eps {
		if !drop[i] {
			out = append(out, e)
		}
	}
	return out, bad
}

// set makes eps and exists the state and reports whether that changed it (the first state
// always does). The new stream, if any, has had its first update.
func (s *endpointSet) set(eps []Endpoint, exists bool) bool {
	s.fresh = false
	if len(eps) == 0 {
		eps = nil
	}
	if s.resolved && s.exists == exists && slices.EqualFunc(s.eps, eps, equalEndpoint) {
		return false
	}
	s.resolved, s.exists, s.eps = true, exists, eps
	return true
}

// convertProfile turns a DestinationProfile into a Profile.
func convertProfile(p *pb.DestinationProfile) (Profile, error) {
	out := Profile{FullyQualifiedName: p.GetFullyQualifiedName(), Opaque: p.GetOpaqueProtocol()}
	if a := p.GetEndpoint(); a != nil {
		e, err := convertEndpoint(a, nil)
		if err != nil {
			return Profile{}, fmt.Errorf("profile: %w", err)
		}
		out.Endpoint = &e
	}
	return out, nil
}

// equalProfile reports whether two profiles say the same thing.
func equalProfile(a, b Profile) bool {
	if a.FullyQualifiedName != b.FullyQualifiedName || a.Opaque != b.Opaque || (a.Endpoint == nil) != (b.Endpoint == nil) {
		return false
	}
	return a.Endpoint == nil || equalEndpoint(*a.Endpoint, *b.Endpoint)
}
