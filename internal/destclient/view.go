package destclient

import (
	"fmt"
	"net/netip"
	"slices"

	pb "github.com/linkerd/linkerd2-proxy-api/go/destination"

	"github.com/meridian-mesh/meridian/internal/wire"
)

// View is the state a proxy holds for one Get stream. Not safe for concurrent use.
type View struct {
	Addrs map[netip.AddrPort]*pb.WeightedAddr
	// SetLabels are the metric labels of the last Add.
	SetLabels map[string]string
	// NoEndpoints is set after a NoEndpoints update until the next Add.
	NoEndpoints *pb.NoEndpoints
	// Updates counts the updates applied.
	Updates int
}

// NewView returns an empty view.
func NewView() *View { return &View{Addrs: map[netip.AddrPort]*pb.WeightedAddr{}} }

// Apply applies one update. A Remove of an address the view does not hold is an error (the
// server sent a delta the client cannot have expected), as is a malformed address.
func (v *View) Apply(u *pb.Update) error {
	v.Updates++
	switch x := u.GetUpdate().(type) {
	case *pb.Update_Add:
		v.NoEndpoints = nil
		if x.Add.GetMetricLabels() != nil {
			v.SetLabels = x.Add.GetMetricLabels()
		}
		for _, a := range x.Add.GetAddrs() {
			ap, err := wire.ToAddrPort(a.GetAddr())
			if err != nil {
				return fmt.Errorf("add: %w", err)
			}
			v.Addrs[ap] = a
		}
	case *pb.Update_Remove:
		for _, a := range x.Remove.GetAddrs() {
			ap, err := wire.ToAddrPort(a)
			if err != nil {
				return fmt.Errorf("remove: %w", err)
			}
			if _, ok := v.Addrs[ap]; !ok {
				return fmt.Errorf("remove of %s, which was never added", ap)
			}
			delete(v.Addrs, ap)
		}
	case *pb.Update_NoEndpoints:
		v.NoEndpoints = x.NoEndpoints
		clear(v.Addrs)
	default:
		return fmt.Errorf("update of unknown kind %T", u.GetUpdate())
	}
	return nil
}

// Sorted returns the held addresses in order.
func (v *View) Sorted() []netip.AddrPort {
	out := make([]netip.AddrPort, 0, len(v.Addrs))
	for a := range v.Addrs {
		out = append(out, a)
	}
	slices.SortFunc(out, func(a, b netip.AddrPort) int { return a.Compare(b) })
	return out
}

// Hint returns the protocol hint of an address as text: "h2", "opaque" or "".
func Hint(a *pb.WeightedAddr) string {
	switch a.GetProtocolHint().GetProtocol().(type) {
	case *pb.ProtocolHint_H2_:
		return "h2"
	case *pb.ProtocolHint_Opaque_:
		return "opaque"
	}
	return ""
}

// Identity returns the TLS identity of an address, or "".
func Identity(a *pb.WeightedAddr) string {
	return a.GetTlsIdentity().GetDnsLikeIdentity().GetName()
}

// OwnerTrailer is the trailer in which a Meridian replica running with --non-owner=redirect
// names the address of the replica that owns the requested service, when it refuses a stream
// with FailedPrecondition. The status message also ends with "meridian-owner=<addr>)".
const OwnerTrailer = "meridian-owner"
