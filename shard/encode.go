package shard

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"
	"sync"

	pb "github.com/linkerd/linkerd2-proxy-api/go/destination"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/meridian-mesh/meridian/internal/wire"
	"github.com/meridian-mesh/meridian/snapshot"
)

// A Get stream's updates are encoded here straight from the snapshot into protobuf bytes,
// without building the messages of the proxy API (weightedAddr and the other builders of
// wire.go): appendAddUpdate writes the bytes that a deterministic proto.Marshal of
// addUpdate(...) writes (the same fields, in the same order; the maps' entries in the
// labels' sorted order), and so for removeUpdate and noEndpointsUpdate. Every nested message is sized first (the size
// functions mirror the append functions), so an update is written in one pass into a buffer
// grown once, and its length prefixes are exact.

// The field numbers of the proxy API's messages written here, from the generated code of
// github.com/linkerd/linkerd2-proxy-api v0.20.0 (go/destination/destination.pb.go and
// go/net/net.pb.go).
const (
	numUpdateAdd         protowire.Number = 1 // Update.add (WeightedAddrSet), oneof
	numUpdateRemove      protowire.Number = 2 // Update.remove (AddrSet), oneof
	numUpdateNoEndpoints protowire.Number = 3 // Update.no_endpoints (NoEndpoints), oneof

	numSetAddrs        protowire.Number = 1 // WeightedAddrSet.addrs and AddrSet.addrs, repeated
	numSetMetricLabels protowire.Number = 2 // WeightedAddrSet.metric_labels, map<string,string>

	numAddrAddr              protowire.Number = 1 // WeightedAddr.addr (TcpAddress)
	numAddrWeight            protowire.Number = 3 // WeightedAddr.weight, uint32
	numAddrMetricLabels      protowire.Number = 4 // WeightedAddr.metric_labels, map<string,string>
	numAddrTLSIdentity       protowire.Number = 5 // WeightedAddr.tls_identity (TlsIdentity)
	numAddrProtocolHint      protowire.Number = 6 // WeightedAddr.protocol_hint (ProtocolHint)
	numAddrAuthorityOverride protowire.Number = 7 // WeightedAddr.authority_override (AuthorityOverride)
	numAddrHTTP2             protowire.Number = 8 // WeightedAddr.http2 (Http2ClientParams)

	numMapKey   protowire.Number = 1 // a map entry's key
	numMapValue protowire.Number = 2 // a map entry's value

	numTLSDNSLikeIdentity protowire.Number = 1 // TlsIdentity.dns_like_identity (DnsLikeIdentity), oneof
	numTLSServerName      protowire.Number = 4 // TlsIdentity.server_name (DnsLikeIdentity)
	numDNSLikeName        protowire.Number = 1 // TlsIdentity.DnsLikeIdentity.name, string

	numHintH2              protowire.Number = 1 // ProtocolHint.h2 (H2, empty), oneof
	numHintOpaqueTransport protowire.Number = 2 // ProtocolHint.opaque_transport (OpaqueTransport)
	numHintOpaque          protowire.Number = 3 // ProtocolHint.opaque (Opaque, empty), oneof
	numOpaqueInboundPort   protowire.Number = 1 // ProtocolHint.OpaqueTransport.inbound_port, uint32

	numAuthorityOverride protowire.Number = 1 // AuthorityOverride.authority_override, string

	numNoEndpointsExists protowire.Number = 1 // NoEndpoints.exists, bool

	numTCPIP   protowire.Number = 1 // TcpAddress.ip (IPAddress)
	numTCPPort protowire.Number = 2 // TcpAddress.port, uint32
	numIPv4    protowire.Number = 1 // IPAddress.ipv4, fixed32, oneof
	numIPv6    protowire.Number = 2 // IPAddress.ipv6 (IPv6), oneof
	numIPv6Hi  protowire.Number = 1 // IPv6.first, fixed64
	numIPv6Lo  protowire.Number = 2 // IPv6.last, fixed64
)

// The constant sub-messages, encoded once: http2Params, and the empty H2 and Opaque hints.
var (
	http2ParamsBytes = mustMarshal(http2Params)
	h2HintBytes      = mustMarshal(&pb.ProtocolHint_H2{})
	opaqueHintBytes  = mustMarshal(&pb.ProtocolHint_Opaque{})
)

func mustMarshal(m proto.Message) []byte {
	b, err := proto.Marshal(m)
	if err != nil {
		panic("shard: encode a constant message: " + err.Error()) // a bug, at init
	}
	return b
}

// appendAddUpdate appends the encoded Update that addUpdate(setLabels, eps) is: an Add of
// eps with the set's labels (sorted by key, as snapshot keeps them).
func appendAddUpdate(b []byte, setLabels []snapshot.Label, eps []*snapshot.Endpoint) []byte {
	// The addresses' sizes, measured once for the set's length and their own: on the stack
	// for a set of up to len(stack).
	var stack [128]int
	sizes := stack[:0]
	set := labelsSize(numSetMetricLabels, setLabels)
	for _, e := range eps {
		n := weightedAddrSize(e)
		sizes = append(sizes, n)
		set += protowire.SizeTag(numSetAddrs) + protowire.SizeBytes(n)
	}
	b = slices.Grow(b, protowire.SizeTag(numUpdateAdd)+protowire.SizeBytes(set))
	b = protowire.AppendTag(b, numUpdateAdd, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(set))
	for i, e := range eps {
		b = protowire.AppendTag(b, numSetAddrs, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(sizes[i]))
		b = appendWeightedAddr(b, e)
	}
	return appendLabels(b, numSetMetricLabels, setLabels)
}

// appendRemoveUpdate appends the encoded Update that removeUpdate(addrs) is.
func appendRemoveUpdate(b []byte, addrs []netip.AddrPort) []byte {
	set := 0
	for _, a := range addrs {
		set += protowire.SizeTag(numSetAddrs) + protowire.SizeBytes(tcpAddrSize(a))
	}
	b = slices.Grow(b, protowire.SizeTag(numUpdateRemove)+protowire.SizeBytes(set))
	b = protowire.AppendTag(b, numUpdateRemove, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(set))
	for _, a := range addrs {
		b = appendTCPAddr(b, numSetAddrs, a)
	}
	return b
}

// appendNoEndpointsUpdate appends the encoded Update that noEndpointsUpdate(exists) is.
func appendNoEndpointsUpdate(b []byte, exists bool) []byte {
	b = protowire.AppendTag(b, numUpdateNoEndpoints, protowire.BytesType)
	if !exists {
		return protowire.AppendVarint(b, 0) // an empty NoEndpoints: proto3 omits false
	}
	b = protowire.AppendVarint(b, uint64(protowire.SizeTag(numNoEndpointsExists)+protowire.SizeVarint(1)))
	b = protowire.AppendTag(b, numNoEndpointsExists, protowire.VarintType)
	return protowire.AppendVarint(b, protowire.EncodeBool(true))
}

// weightedAddrSize is the size of weightedAddr(e) encoded, without its tag and length.
func weightedAddrSize(e *snapshot.Endpoint) int {
	n := protowire.SizeTag(numAddrAddr) + protowire.SizeBytes(tcpAddrSize(e.Addr))
	if e.Weight != 0 {
		n += protowire.SizeTag(numAddrWeight) + protowire.SizeVarint(uint64(e.Weight))
	}
	for l := range e.MetricLabels() {
		n += protowire.SizeTag(numAddrMetricLabels) + protowire.SizeBytes(labelEntrySize(l))
	}
	if id := e.Identity(); id != "" {
		n += protowire.SizeTag(numAddrTLSIdentity) + protowire.SizeBytes(tlsIdentitySize(id))
	}
	if h := hintSize(e); h >= 0 {
		n += protowire.SizeTag(numAddrProtocolHint) + protowire.SizeBytes(h)
	}
	if o := e.AuthorityOverride(); o != "" {
		n += protowire.SizeTag(numAddrAuthorityOverride) + protowire.SizeBytes(stringFieldSize(numAuthorityOverride, o))
	}
	if e.HTTP2 {
		n += protowire.SizeTag(numAddrHTTP2) + protowire.SizeBytes(len(http2ParamsBytes))
	}
	return n
}

// appendWeightedAddr appends the fields of weightedAddr(e) (its tag and length are the
// caller's), in the order proto.Marshal writes them: the bytes of equal endpoints must be
// equal whichever encoder wrote them, as wire.Fingerprint compares them (a handover
// reconciles what a relay held from this encoder's bytes with messages marshalled by
// proto.Marshal). Go's encoder writes a message's fields by number, except that it writes
// a oneof's after all others.
func appendWeightedAddr(b []byte, e *snapshot.Endpoint) []byte {
	b = appendTCPAddr(b, numAddrAddr, e.Addr)
	if e.Weight != 0 {
		b = protowire.AppendTag(b, numAddrWeight, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(e.Weight))
	}
	for l := range e.MetricLabels() {
		b = appendLabel(b, numAddrMetricLabels, l)
	}
	if id := e.Identity(); id != "" {
		b = protowire.AppendTag(b, numAddrTLSIdentity, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(tlsIdentitySize(id)))
		// server_name before the strategy, a oneof, which proto.Marshal writes last
		b = appendDNSLikeIdentity(b, numTLSServerName, id)
		b = appendDNSLikeIdentity(b, numTLSDNSLikeIdentity, id)
	}
	if h := hintSize(e); h >= 0 {
		b = protowire.AppendTag(b, numAddrProtocolHint, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(h))
		b = appendHint(b, e)
	}
	if o := e.AuthorityOverride(); o != "" {
		b = protowire.AppendTag(b, numAddrAuthorityOverride, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(stringFieldSize(numAuthorityOverride, o)))
		b = protowire.AppendTag(b, numAuthorityOverride, protowire.BytesType)
		b = protowire.AppendString(b, o)
	}
	if e.HTTP2 {
		b = protowire.AppendTag(b, numAddrHTTP2, protowire.BytesType)
		b = protowire.AppendBytes(b, http2ParamsBytes)
	}
	return b
}

// stringFieldSize is the size of a string field num holding s (tag, length and bytes).
func stringFieldSize(num protowire.Number, s string) int {
	return protowire.SizeTag(num) + protowire.SizeBytes(len(s))
}

// tlsIdentitySize is the size of the TlsIdentity of identity: the DNS-like identity as its
// strategy and as its server name.
func tlsIdentitySize(identity string) int {
	dns := stringFieldSize(numDNSLikeName, identity)
	return protowire.SizeTag(numTLSDNSLikeIdentity) + protowire.SizeBytes(dns) +
		protowire.SizeTag(numTLSServerName) + protowire.SizeBytes(dns)
}

// appendDNSLikeIdentity appends field num, a DnsLikeIdentity named identity.
func appendDNSLikeIdentity(b []byte, num protowire.Number, identity string) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(stringFieldSize(numDNSLikeName, identity)))
	b = protowire.AppendTag(b, numDNSLikeName, protowire.BytesType)
	return protowire.AppendString(b, identity)
}

// hintBytes is e's protocol (the encoded H2 or Opaque), and its field number; 0 for none.
func hintBytes(e *snapshot.Endpoint) ([]byte, protowire.Number) {
	switch e.Hint {
	case snapshot.HintH2:
		return h2HintBytes, numHintH2
	case snapshot.HintOpaque:
		return opaqueHintBytes, numHintOpaque
	}
	return nil, 0
}

// hintSize is the size of e's ProtocolHint, -1 when it has none: its protocol, and the
// opaque transport when it has a port (only with a hint, as weightedAddr sends it).
func hintSize(e *snapshot.Endpoint) int {
	p, num := hintBytes(e)
	if num == 0 {
		return -1
	}
	n := protowire.SizeTag(num) + protowire.SizeBytes(len(p))
	if e.OpaqueTransportPort != 0 {
		n += protowire.SizeTag(numHintOpaqueTransport) + protowire.SizeBytes(opaqueTransportSize(e.OpaqueTransportPort))
	}
	return n
}

func opaqueTransportSize(port uint16) int {
	return protowire.SizeTag(numOpaqueInboundPort) + protowire.SizeVarint(uint64(port))
}

// appendHint appends the fields of e's ProtocolHint, which it has (hintSize >= 0), in the
// order proto.Marshal writes them: the opaque transport, then the protocol (a oneof, which
// Go's encoder writes after the other fields, as it has always done).
func appendHint(b []byte, e *snapshot.Endpoint) []byte {
	if e.OpaqueTransportPort != 0 {
		b = protowire.AppendTag(b, numHintOpaqueTransport, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(opaqueTransportSize(e.OpaqueTransportPort)))
		b = protowire.AppendTag(b, numOpaqueInboundPort, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(e.OpaqueTransportPort))
	}
	p, num := hintBytes(e)
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, p)
}

// labelEntrySize is the size of one map entry {key = 1, value = 2}, without its tag and
// length (both key and value are written, as proto.Marshal writes map entries).
func labelEntrySize(l snapshot.Label) int {
	return stringFieldSize(numMapKey, l.Key) + stringFieldSize(numMapValue, l.Value)
}

// labelsSize is the size of ls as the map field num, 0 for none.
func labelsSize(num protowire.Number, ls []snapshot.Label) int {
	n := 0
	for _, l := range ls {
		n += protowire.SizeTag(num) + protowire.SizeBytes(labelEntrySize(l))
	}
	return n
}

// appendLabels appends ls as the map field num: one entry each, in their (sorted) order.
func appendLabels(b []byte, num protowire.Number, ls []snapshot.Label) []byte {
	for _, l := range ls {
		b = appendLabel(b, num, l)
	}
	return b
}

// appendLabel appends l as one entry of the map field num.
func appendLabel(b []byte, num protowire.Number, l snapshot.Label) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(labelEntrySize(l)))
	b = protowire.AppendTag(b, numMapKey, protowire.BytesType)
	b = protowire.AppendString(b, l.Key)
	b = protowire.AppendTag(b, numMapValue, protowire.BytesType)
	return protowire.AppendString(b, l.Value)
}

// ipv6Halves are the IPv6 fields of a (not an IPv4 address once unmapped), as wire.IP
// splits it.
func ipv6Halves(a netip.Addr) (hi, lo uint64) {
	b := a.As16()
	return binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])
}

// ipSize is the size of wire.IP(a) encoded: an IPv4 address as ipv4 (written even when 0,
// as a oneof member is), any other as an IPv6 whose zero halves are omitted.
func ipSize(a netip.Addr) int {
	a = a.Unmap()
	if a.Is4() {
		return protowire.SizeTag(numIPv4) + protowire.SizeFixed32()
	}
	return protowire.SizeTag(numIPv6) + protowire.SizeBytes(ipv6Size(a))
}

func ipv6Size(a netip.Addr) int {
	hi, lo := ipv6Halves(a)
	n := 0
	if hi != 0 {
		n += protowire.SizeTag(numIPv6Hi) + protowire.SizeFixed64()
	}
	if lo != 0 {
		n += protowire.SizeTag(numIPv6Lo) + protowire.SizeFixed64()
	}
	return n
}

// tcpAddrSize is the size of wire.TCPAddr(ap) encoded, without its tag and length.
func tcpAddrSize(ap netip.AddrPort) int {
	n := protowire.SizeTag(numTCPIP) + protowire.SizeBytes(ipSize(ap.Addr()))
	if p := ap.Port(); p != 0 {
		n += protowire.SizeTag(numTCPPort) + protowire.SizeVarint(uint64(p))
	}
	return n
}

// appendTCPAddr appends field num, wire.TCPAddr(ap).
func appendTCPAddr(b []byte, num protowire.Number, ap netip.AddrPort) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(tcpAddrSize(ap)))
	b = protowire.AppendTag(b, numTCPIP, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(ipSize(ap.Addr())))
	if a := ap.Addr().Unmap(); a.Is4() {
		b = protowire.AppendTag(b, numIPv4, protowire.Fixed32Type)
		v4 := a.As4()
		b = protowire.AppendFixed32(b, binary.BigEndian.Uint32(v4[:]))
	} else {
		hi, lo := ipv6Halves(a)
		b = protowire.AppendTag(b, numIPv6, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(ipv6Size(a)))
		if hi != 0 {
			b = protowire.AppendTag(b, numIPv6Hi, protowire.Fixed64Type)
			b = protowire.AppendFixed64(b, hi)
		}
		if lo != 0 {
			b = protowire.AppendTag(b, numIPv6Lo, protowire.Fixed64Type)
			b = protowire.AppendFixed64(b, lo)
		}
	}
	if p := ap.Port(); p != 0 {
		b = protowire.AppendTag(b, numTCPPort, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(p))
	}
	return b
}

// encodedUpdate is one update of a Get stream, encoded, and its kind.
type encodedUpdate struct {
	b    []byte
	kind wire.UpdateKind
}

// updateBatch holds the encoded updates of one step of a Get stream (at most a few), one
// after another in buf. An update's bytes stay valid when a later one grows buf: appending
// never rewrites what a slice of the old buffer shows. Batches are pooled (newUpdateBatch,
// release), so that a stream holds no buffer between its steps: the codec copies each update
// as it is sent (serverCodec).
type updateBatch struct {
	buf []byte
	ups []encodedUpdate
}

// maxPooledBatch is the largest buffer a released batch keeps.
const maxPooledBatch = 1 << 20

var updateBatches = sync.Pool{New: func() any { return new(updateBatch) }}

func newUpdateBatch() *updateBatch { return updateBatches.Get().(*updateBatch) }

// release returns u to the pool; none of its updates may be used after.
func (u *updateBatch) release() {
	clear(u.ups)
	u.ups = u.ups[:0]
	u.buf = u.buf[:0]
	if cap(u.buf) > maxPooledBatch {
		u.buf = nil
	}
	updateBatches.Put(u)
}

// added records the update appended to buf from start.
func (u *updateBatch) added(start int, kind wire.UpdateKind) {
	u.ups = append(u.ups, encodedUpdate{b: u.buf[start:len(u.buf):len(u.buf)], kind: kind})
}

func (u *updateBatch) add(setLabels []snapshot.Label, eps []*snapshot.Endpoint) {
	start := len(u.buf)
	u.buf = appendAddUpdate(u.buf, setLabels, eps)
	u.added(start, wire.UpdateAdd)
}

func (u *updateBatch) remove(addrs []netip.AddrPort) {
	start := len(u.buf)
	u.buf = appendRemoveUpdate(u.buf, addrs)
	u.added(start, wire.UpdateRemove)
}

func (u *updateBatch) noEndpoints(exists bool) {
	start := len(u.buf)
	u.buf = appendNoEndpointsUpdate(u.buf, exists)
	u.added(start, wire.UpdateNoEndpoints)
}

// messages appends updates built as messages (a handover's, from destclient.Held.Reconcile),
// marshalled deterministically (maps by key), as the encoder above writes them.
func (u *updateBatch) messages(ups []*pb.Update) error {
	for _, m := range ups {
		start := len(u.buf)
		var err error
		if u.buf, err = (proto.MarshalOptions{Deterministic: true}).MarshalAppend(u.buf, m); err != nil {
			return fmt.Errorf("encode update: %w", err)
		}
		u.added(start, updateKind(m))
	}
	return nil
}

// updateKind is the kind of m (wire.UpdateNone when it has none).
func updateKind(m *pb.Update) wire.UpdateKind {
	switch m.GetUpdate().(type) {
	case *pb.Update_Add:
		return wire.UpdateAdd
	case *pb.Update_Remove:
		return wire.UpdateRemove
	case *pb.Update_NoEndpoints:
		return wire.UpdateNoEndpoints
	}
	return wire.UpdateNone
}

// send sends u's updates in order, until one fails.
func (u *updateBatch) send(send func(b []byte, kind wire.UpdateKind) error) error {
	for _, x := range u.ups {
		if err := send(x.b, x.kind); err != nil {
			return err
		}
	}
	return nil
}
