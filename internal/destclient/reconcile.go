package destclient

import (
	"errors"
	"net/netip"

	pb "github.com/linkerd/linkerd2-proxy-api/go/destination"
	pbnet "github.com/linkerd/linkerd2-proxy-api/go/net"
	"google.golang.org/protobuf/proto"

	"github.com/meridian-mesh/meridian/internal/wire"
)

// Started reports whether the view has received anything.
func (v *View) Started() bool { return v.Updates > 0 }

// Reconcile takes the first update of a new stream for the same target — the full state the
// new server holds: one Add, or NoEndpoints — and returns the updates that take a client
// holding v to that state, applying them to v. A client that moves between replicas thus sees
// deltas, never a reset: nothing for addresses it already holds unchanged.
func (v *View) Reconcile(full *pb.Update) ([]*pb.Update, error) {
	next := map[netip.AddrPort]*pb.WeightedAddr{}
	var labels map[string]string
	exists := true
	switch x := full.GetUpdate().(type) {
	case *pb.Update_Add:
		labels = x.Add.GetMetricLabels()
		for _, a := range x.Add.GetAddrs() {
			ap, err := wire.ToAddrPort(a.GetAddr())
			if err != nil {
				return nil, err
			}
			next[ap] = a
		}
	case *pb.Update_NoEndpoints:
		exists = x.NoEndpoints.GetExists()
	case *pb.Update_Remove:
		return nil, errors.New("a stream's first update must be its full state (Add or NoEndpoints), got Remove")
	default:
		return nil, errors.New("update of unknown kind")
	}
	var out []*pb.Update
	if len(next) == 0 {
		if !v.Started() || len(v.Addrs) > 0 || v.NoEndpoints == nil || v.NoEndpoints.GetExists() != exists {
			out = append(out, &pb.Update{Update: &pb.Update_NoEndpoints{NoEndpoints: &pb.NoEndpoints{Exists: exists}}})
		}
	} else {
		var removed []*pbnet.TcpAddress
		for ap := range v.Addrs {
			if _, ok := next[ap]; !ok {
				removed = append(removed, wire.TCPAddr(ap))
			}
		}
		var added []*pb.WeightedAddr
		for _, ap := range sortedKeys(next) {
			if old, ok := v.Addrs[ap]; !ok || !proto.Equal(old, next[ap]) {
				added = append(added, next[ap])
			}
		}
		if len(removed) > 0 {
			out = append(out, &pb.Update{Update: &pb.Update_Remove{Remove: &pb.AddrSet{Addrs: removed}}})
		}
		if len(added) > 0 || v.NoEndpoints != nil || !v.Started() {
			out = append(out, &pb.Update{Update: &pb.Update_Add{Add: &pb.WeightedAddrSet{Addrs: added, MetricLabels: labels}}})
		}
	}
	for _, u := range out {
		if err := v.Apply(u); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func sortedKeys(m map[netip.AddrPort]*pb.WeightedAddr) []netip.AddrPort {
	v := &View{Addrs: m}
	return v.Sorted()
}
