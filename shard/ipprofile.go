package shard

import (
	"context"
	"fmt"
	"net/netip"
	"strings"

	pb "github.com/linkerd/linkerd2-proxy-api/go/destination"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/meridian-mesh/meridian/translator"
)

// profileByIP serves GetProfile for an IP address, as Linkerd's destination does: a cluster
// IP (any of a Service's cluster IPs) answers as its Service would by name, through the
// replica that owns the service (the relayed request names the Service, so the owner need
// not look the address up again). Any other address is answered by the replica that owns it
// in the ring (ipKey), which indexes the pods that have it (ipIndex): here when it is this
// one, else relayed to it (or redirected), following the address as the ring changes. An
// address two Services claim is FailedPrecondition. While the source has not delivered its
// first state, the answer is Unavailable: an address not known yet is not one that nothing
// holds.
func (s *Server) profileByIP(req *pb.GetDestination, ap netip.AddrPort, stream pb.Destination_GetProfileServer) error {
	if s.local.loading() {
		return status.Errorf(codes.Unavailable, "meridian: this replica has not loaded the cluster yet; retry")
	}
	switch services := s.local.idx.ips.lookup(ap.Addr()).services; len(services) {
	case 0:
	case 1:
		k := services[0]
		t := translator.Target{Service: k.Name, Namespace: k.Namespace, Port: uint32(ap.Port())}
		byName := proto.Clone(req).(*pb.GetDestination)
		byName.Path = fmt.Sprintf("%s.%s.svc.%s:%d", k.Name, k.Namespace, s.cfg.Translator.ClusterDomain, ap.Port())
		return s.serviceProfile(byName, t, k, stream)
	default:
		return status.Errorf(codes.FailedPrecondition, "found %d services with the cluster IP %s: %s", len(services), ap.Addr(), keyList(services))
	}
	k := ipKey(ap.Addr())
	return s.followProfile(req, stream, k, func(v *ringView, send func(*pb.DestinationProfile) error) error {
		return s.local.ipProfile(stream.Context(), ap, k, v, send)
	})
}

// ipProfile serves the profile of an address that is no Service's, which this replica owns
// (k is its ipKey): a pod's address gets the pod's endpoint (translator.PodEndpoint), any
// other the default profile with the bare address, opaque on the default opaque ports. A new
// profile is sent whenever the pod holding the address, or its namespace's Servers, change
// (send drops repeats); the stream ends with the client, errMoved when the ring gives the
// address to another replica, or Unavailable when the replica stops. Two pods with the
// address are FailedPrecondition at the start; later, the address is served as no pod's.
func (l *local) ipProfile(ctx context.Context, ap netip.AddrPort, k ServiceKey, v *ringView, send func(*pb.DestinationProfile) error) error {
	var last *pb.DestinationProfile
	for {
		if l.lost(k) { // as a Get's segment checks (local.lost)
			return errMoved
		}
		changed, stopIP := l.idx.ips.watch(ap.Addr())
		tgt := l.idx.ips.lookup(ap.Addr())
		if len(tgt.pods) > 1 && last == nil {
			stopIP()
			return status.Errorf(codes.FailedPrecondition, "found %d pods with the pod network IP %s: %s", len(tgt.pods), ap.Addr(), podList(tgt.pods))
		}
		var pod *translator.Pod
		servers := func() {}
		var nsChanged <-chan struct{}
		if len(tgt.pods) == 1 {
			pk := tgt.pods[0]
			nsChanged, servers = l.idx.cluster.nsWatchers.watch(pk.Namespace)
			pod = l.idx.pods(pk.Namespace, pk.Name)
		}
		var srvs []*translator.Server
		if pod != nil {
			srvs = l.idx.cluster.serversOf(pod.Namespace())
		}
		ep := translator.PodEndpoint(l.cfg.Translator, pod, ap, srvs)
		p := &pb.DestinationProfile{RetryBudget: retryBudget(l.cfg), Endpoint: podEndpointAddr(ep.Endpoint), OpaqueProtocol: ep.Opaque}
		err := send(p)
		last = p
		if err == nil {
			select {
			case <-ctx.Done():
			case <-l.stop:
				err = errStopping
			case <-v.changed:
				if v = l.own.load(); !ownsKey(v, k) {
					err = errMoved
				}
			case <-changed:
			case <-nsChanged:
			}
		}
		stopIP()
		servers()
		if err != nil || ctx.Err() != nil {
			return err
		}
	}
}

func ownsKey(v *ringView, k ServiceKey) bool {
	_, local := v.owner(k)
	return local
}

func keyList(ks []ServiceKey) string {
	s := make([]string, len(ks))
	for i, k := range ks {
		s[i] = k.String()
	}
	return strings.Join(s, ", ")
}

func podList(ps []podKey) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.Namespace + "/" + p.Name
	}
	return strings.Join(s, ", ")
}
