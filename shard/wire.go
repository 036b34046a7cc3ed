package shard

import (
	"net/netip"

	pb "github.com/linkerd/linkerd2-proxy-api/go/destination"
	"github.com/linkerd/linkerd2-proxy-api/go/meta"
	pbnet "github.com/linkerd/linkerd2-proxy-api/go/net"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/meridian-mesh/meridian/internal/destclient"
	"github.com/meridian-mesh/meridian/internal/wire"
	"github.com/meridian-mesh/meridian/snapshot"
	"github.com/meridian-mesh/meridian/translator"
)

// http2Params are the client parameters sent for meshed endpoints (Linkerd's defaults:
// keep-alive pings every 10s, 3s timeout, while idle).
var http2Params = &pb.Http2ClientParams{
	KeepAlive: &pb.Http2ClientParams_KeepAlive{
		Interval:  durationpb.New(10e9),
		Timeout:   durationpb.New(3e9),
		WhileIdle: true,
	},
}

func labelMap(ls []snapshot.Label) map[string]string {
	if len(ls) == 0 {
		return nil
	}
	m := make(map[string]string, len(ls))
	for _, l := range ls {
		m[l.Key] = l.Value
	}
	return m
}

// endpointLabelMap returns the metric labels of e as a map (nil for none).
func endpointLabelMap(e *snapshot.Endpoint) map[string]string {
	var m map[string]string
	for l := range e.MetricLabels() {
		if m == nil {
			m = make(map[string]string, len(e.Labels)+1)
		}
		m[l.Key] = l.Value
	}
	return m
}

// weightedAddr encodes one endpoint as the API's WeightedAddr. A Get stream's updates are
// written as bytes by appendWeightedAddr (encode.go), which follows the same rules: change
// both together (encode_test.go checks that they agree).
func weightedAddr(e *snapshot.Endpoint) *pb.WeightedAddr {
	wa := &pb.WeightedAddr{
		Addr:         wire.TCPAddr(e.Addr),
		Weight:       e.Weight,
		MetricLabels: endpointLabelMap(e),
	}
	if name := e.Identity(); name != "" {
		id := &pb.TlsIdentity_DnsLikeIdentity{Name: name}
		wa.TlsIdentity = &pb.TlsIdentity{
			Strategy:   &pb.TlsIdentity_DnsLikeIdentity_{DnsLikeIdentity: id},
			ServerName: &pb.TlsIdentity_DnsLikeIdentity{Name: name},
		}
	}
	switch e.Hint {
	case snapshot.HintH2:
		wa.ProtocolHint = &pb.ProtocolHint{Protocol: &pb.ProtocolHint_H2_{H2: &pb.ProtocolHint_H2{}}}
	case snapshot.HintOpaque:
		wa.ProtocolHint = &pb.ProtocolHint{Protocol: &pb.ProtocolHint_Opaque_{Opaque: &pb.ProtocolHint_Opaque{}}}
	}
	if e.OpaqueTransportPort != 0 && wa.ProtocolHint != nil {
		wa.ProtocolHint.OpaqueTransport = &pb.ProtocolHint_OpaqueTransport{InboundPort: uint32(e.OpaqueTransportPort)}
	}
	if e.HTTP2 {
		wa.Http2 = http2Params
	}
	if o := e.AuthorityOverride(); o != "" {
		wa.AuthorityOverride = &pb.AuthorityOverride{AuthorityOverride: o}
	}
	return wa
}

// podEndpointAddr encodes an endpoint as a profile's endpoint: a pod's carries the
// namespace label too (Get carries it in the set's labels), as Linkerd's does.
func podEndpointAddr(e *snapshot.Endpoint) *pb.WeightedAddr {
	wa := weightedAddr(e)
	if ns := e.PodNamespace(); ns != "" {
		if wa.MetricLabels == nil {
			wa.MetricLabels = map[string]string{}
		}
		wa.MetricLabels[translator.LabelKeyNamespace] = ns
	}
	return wa
}

// serviceRef is the proxy API's reference to port of a Service (a profile's parent).
func serviceRef(name, namespace string, port uint32) *meta.Metadata {
	return &meta.Metadata{Kind: &meta.Metadata_Resource{Resource: &meta.Resource{
		Group: "core", Kind: "Service", Name: name, Namespace: namespace, Port: port,
	}}}
}

// addUpdate, removeUpdate and noEndpointsUpdate build a Get stream's updates as messages:
// what a handover reconciles (fullUpdate, viewOf) and what the encoder of the stream's own
// updates (appendAddUpdate and the others, encode.go) is checked against.
func addUpdate(setLabels []snapshot.Label, eps []*snapshot.Endpoint) *pb.Update {
	addrs := make([]*pb.WeightedAddr, len(eps))
	for i, e := range eps {
		addrs[i] = weightedAddr(e)
	}
	return &pb.Update{Update: &pb.Update_Add{Add: &pb.WeightedAddrSet{Addrs: addrs, MetricLabels: labelMap(setLabels)}}}
}

func removeUpdate(addrs []netip.AddrPort) *pb.Update {
	out := make([]*pbnet.TcpAddress, len(addrs))
	for i, a := range addrs {
		out[i] = wire.TCPAddr(a)
	}
	return &pb.Update{Update: &pb.Update_Remove{Remove: &pb.AddrSet{Addrs: out}}}
}

func noEndpointsUpdate(exists bool) *pb.Update {
	return &pb.Update{Update: &pb.Update_NoEndpoints{NoEndpoints: &pb.NoEndpoints{Exists: exists}}}
}

// streamState is what a Get stream's client holds, enough to turn subscription deltas into
// the updates Linkerd's proxies expect.
type streamState struct {
	hostname string                      // "" for a whole service
	held     map[netip.AddrPort]struct{} // addresses held, tracked only for hostname streams
	empty    bool                        // the client was told NoEndpoints (or nothing yet)
	exists   bool
	started  bool
}

// encode appends to out the updates that take the client from its state through d (encoded,
// as addUpdate, removeUpdate and noEndpointsUpdate would be marshalled), and advances it.
func (st *streamState) encode(d snapshot.Delta, out *updateBatch) {
	add, remove := d.Add, d.Remove
	count := d.To.Len()
	if st.hostname != "" {
		if st.held == nil {
			st.held = map[netip.AddrPort]struct{}{}
		}
		add, remove = nil, nil
		for _, a := range d.Remove {
			if _, ok := st.held[a]; ok {
				remove = append(remove, a)
				delete(st.held, a)
			}
		}
		for _, e := range d.Add {
			if e.Hostname() == st.hostname {
				add = append(add, e)
				st.held[e.Addr] = struct{}{}
			} else if _, ok := st.held[e.Addr]; ok {
				remove = append(remove, e.Addr)
				delete(st.held, e.Addr)
			}
		}
		count = len(st.held)
	}
	exists := d.To != nil && d.To.Exists
	if count == 0 {
		if !st.started || !st.empty || st.exists != exists {
			out.noEndpoints(exists)
		}
		st.empty, st.exists, st.started = true, exists, true
		return
	}
	if len(remove) > 0 && !st.empty {
		out.remove(remove)
	}
	if len(add) > 0 {
		var setLabels []snapshot.Label
		if d.To != nil {
			setLabels = d.To.Labels
		}
		out.add(setLabels, add)
	}
	st.empty, st.exists, st.started = false, exists, true
}

// visible returns the endpoints of set a stream for hostname ("" for all) shows, in order:
// for all, set's own slice (read it, never change it).
func visible(set *snapshot.AddressSet, hostname string) []*snapshot.Endpoint {
	if set == nil {
		return nil
	}
	if hostname == "" {
		return set.Endpoints
	}
	var out []*snapshot.Endpoint
	for _, e := range set.Endpoints {
		if e.Hostname() == hostname {
			out = append(out, e)
		}
	}
	return out
}

// fullUpdate is the whole state of set as a stream's first update: one Add, or NoEndpoints.
func fullUpdate(set *snapshot.AddressSet, hostname string) *pb.Update {
	eps := visible(set, hostname)
	if len(eps) == 0 {
		return noEndpointsUpdate(set != nil && set.Exists)
	}
	return addUpdate(set.Labels, eps)
}

// viewOf is what a client holds after receiving snap (nil: nothing yet) on a stream for
// hostname.
func viewOf(snap *snapshot.Snapshot, hostname string) *destclient.Held {
	v := destclient.NewHeld()
	if snap == nil {
		return v
	}
	_ = v.Apply(fullUpdate(snap.Set, hostname))
	return v
}

// init sets the state to a client that holds exactly set.
func (st *streamState) init(set *snapshot.AddressSet) {
	eps := visible(set, st.hostname)
	st.started, st.empty, st.exists = true, len(eps) == 0, set != nil && set.Exists
	if st.hostname != "" {
		st.held = make(map[netip.AddrPort]struct{}, len(eps))
		for _, e := range eps {
			st.held[e.Addr] = struct{}{}
		}
	}
}
