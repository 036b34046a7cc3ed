package shard

import (
	"bytes"
	"context"
	"errors"
	"time"

	pb "github.com/linkerd/linkerd2-proxy-api/go/destination"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/meridian-mesh/meridian/internal/destclient"
	"github.com/meridian-mesh/meridian/internal/wire"
	"github.com/meridian-mesh/meridian/ring"
	"github.com/meridian-mesh/meridian/translator"
)

// Server implements io.linkerd.proxy.destination.Destination. Each stream is served in
// segments, each either local (from the index, while this replica owns the service) or
// relayed to the owner, as the ownership view says; it moves between them as the ring
// changes.
type Server struct {
	pb.UnimplementedDestinationServer
	cfg   Config
	own   *ownership
	local *local
	relay *relay
	m     *replicaMetrics
	log   *zap.Logger
	stop  <-chan struct{}
}

var _ pb.DestinationServer = (*Server)(nil)

// errMoved ends one segment of a stream whose service changed owner.
var errMoved = errors.New("service changed owner")

// notOwner answers a stream that reached a replica that does not own its service and may not
// relay it: a redirect naming the owner, or, for a stream relayed here already, Unavailable.
func (s *Server) notOwner(stream grpc.ServerStream, k ServiceKey, owner ring.Member) error {
	if isForwarded(stream.Context()) {
		return status.Errorf(codes.Unavailable, "meridian: this replica does not own %s by its ring (owner %s); ring views differ briefly after a change, retry", k, owner.Addr)
	}
	s.m.redirects.Inc()
	stream.SetTrailer(metadata.Pairs(destclient.OwnerTrailer, owner.Addr))
	return status.Errorf(codes.FailedPrecondition, "meridian: this replica does not own %s; connect to its owner %s (%s=%s)", k, owner.Name, destclient.OwnerTrailer, owner.Addr)
}

// Get streams the endpoints of a service port: the current set first (or NoEndpoints at
// once), then deltas. A replica that does not own the service relays the stream to the owner
// (or redirects); when the service changes owner the stream follows it, and the client
// receives only the difference between what it holds and what the new owner serves.
func (s *Server) Get(req *pb.GetDestination, stream pb.Destination_GetServer) error {
	t, k, err := s.target(req)
	if err != nil {
		return err
	}
	node := translator.ParseContextToken(req.GetContextToken()).NodeName
	ctx := stream.Context()
	out := getSender{stream: stream, m: s.m}
	s.m.streams.WithLabelValues("get").Inc()
	defer s.m.streams.WithLabelValues("get").Dec()
	var view *destclient.Held // what the client holds, when a segment elsewhere served it
	return s.follow(stream, k, func() bool { return view != nil && view.Started() },
		func(v *ringView) (err error) {
			view, err = s.local.get(ctx, t, k, node, v, view, out.raw)
			return err
		},
		func(owner ring.Member, v *ringView) (err error) {
			view, err = s.relay.get(ctx, req, k, owner, v, view, out)
			return err
		})
}

// GetProfile streams the profile of a service port: its fully qualified name, the default
// retry budget and whether the port is opaque; a port the Service does not declare gets the
// empty profile. A new profile is sent whenever it changes, including when the service moves
// to another owner. An IP address is looked up (profileByIP): a cluster IP answers as its
// Service, a pod IP with the pod's endpoint, any other with the default profile.
func (s *Server) GetProfile(req *pb.GetDestination, stream pb.Destination_GetProfileServer) error {
	t, err := translator.ParseAuthority(s.cfg.Translator, req.GetPath())
	if errors.Is(err, translator.ErrIPAddress) {
		if ap, ok := translator.ParseIPAuthority(req.GetPath()); ok {
			return s.profileByIP(req, ap, stream)
		}
	}
	if err != nil {
		return status.Error(codes.InvalidArgument, err.Error())
	}
	return s.serviceProfile(req, t, NewServiceKey(t.Namespace, t.Service), stream)
}

// serviceProfile serves the profile of t, a port of service k (or a pod of it by hostname),
// locally or relayed to the owner of k, which is sent req.
func (s *Server) serviceProfile(req *pb.GetDestination, t translator.Target, k ServiceKey, stream pb.Destination_GetProfileServer) error {
	clientNS := translator.ParseContextToken(req.GetContextToken()).Namespace
	return s.followProfile(req, stream, k, func(v *ringView, send func(*pb.DestinationProfile) error) error {
		return s.local.profile(stream.Context(), t, k, clientNS, v, send)
	})
}

// followProfile serves a GetProfile stream of key k in segments (follow): local ones by
// local, relayed ones by the owner of k, which is sent req. Each sends through a
// profileSender, which passes on only a profile that differs from the last one sent.
func (s *Server) followProfile(req *pb.GetDestination, stream pb.Destination_GetProfileServer, k ServiceKey, local func(v *ringView, send func(*pb.DestinationProfile) error) error) error {
	ctx := stream.Context()
	s.m.streams.WithLabelValues("get_profile").Inc()
	defer s.m.streams.WithLabelValues("get_profile").Dec()
	ps := &profileSender{stream: stream}
	return s.follow(stream, k, func() bool { return ps.last != nil },
		func(v *ringView) error { ps.segment(); return local(v, ps.send) },
		func(owner ring.Member, v *ringView) error {
			ps.segment()
			return s.relay.profile(ctx, req, k, owner, v, ps)
		})
}

// profileSender sends a GetProfile stream's profiles, each encoded once, deterministically,
// and only when its bytes differ from the last one sent: equal profiles encode to equal bytes.
// It keeps the last profile as those bytes rather than as the message, and the stream's
// codec writes them as they are (encodedMessage). Encoding here, above gRPC's send path,
// keeps the stream's goroutine shallow: comparing and encoding the message walk it by
// reflection, and below that path they grew the goroutine's stack from 8 to 16 KiB for good
// (BenchmarkStreamStack).
//
// The first profile of a segment (served here, or relayed from an owner, after a handover)
// that differs from the last one in its bytes is also compared with it decoded: an owner
// of an earlier version encoded a profile's maps (an endpoint's metric labels) in any order,
// and its client must not get the same profile again because a handover went through it.
type profileSender struct {
	stream grpc.ServerStream
	last   []byte // nil until the first profile is sent
	fresh  bool   // no profile passed on in this segment yet
}

// segment starts a segment of the stream.
func (ps *profileSender) segment() { ps.fresh = true }

// send sends p unless it is the profile sent last.
func (ps *profileSender) send(p *pb.DestinationProfile) error {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(p)
	if err != nil {
		return status.Errorf(codes.Internal, "encode profile: %v", err)
	}
	return ps.sendOwned(b)
}

// sendEncoded sends the profile encoded as b (an owner's, relayed; valid only during the
// call, so kept as a copy) unless it is the one sent last. Owners encode deterministically
// as send does, so a profile that did not change across a handover is not sent twice (and
// one of an owner of an earlier version is caught by sendOwned's decoded comparison).
func (ps *profileSender) sendEncoded(b []byte) error { return ps.sendOwned(bytes.Clone(b)) }

// sendOwned sends b, which it may keep, unless it is the profile sent last.
func (ps *profileSender) sendOwned(b []byte) error {
	if b == nil {
		b = []byte{} // an empty profile is still one sent
	}
	if ps.last != nil && bytes.Equal(ps.last, b) {
		return nil
	}
	fresh := ps.fresh
	ps.fresh = false
	if fresh && ps.last != nil && sameProfile(ps.last, b) {
		ps.last = b // as this segment's source encodes it
		return nil
	}
	if err := ps.stream.SendMsg(encodedMessage(b)); err != nil {
		return err
	}
	ps.last = b
	return nil
}

// sameProfile reports whether a and b encode equal profiles (false when either does not
// decode).
func sameProfile(a, b []byte) bool {
	var x, y pb.DestinationProfile
	return proto.Unmarshal(a, &x) == nil && proto.Unmarshal(b, &y) == nil && proto.Equal(&x, &y)
}

// target parses the authority a stream asks for (InvalidArgument when it is not a service).
func (s *Server) target(req *pb.GetDestination) (translator.Target, ServiceKey, error) {
	t, err := translator.ParseAuthority(s.cfg.Translator, req.GetPath())
	if err != nil {
		return t, ServiceKey{}, status.Error(codes.InvalidArgument, err.Error())
	}
	return t, NewServiceKey(t.Namespace, t.Service), nil
}

// follow serves one stream for service k in segments, each either local (this replica owns
// k) or relayed to the owner, until the stream ends. A segment that ends because k changed
// owner is followed at once by the next (once the view has changed: the index gives a lost
// service up before the view does, while a ring change loads what it gained); one that ends
// because the owner is gone or not ready is retried with backoff, keeping what the client
// holds. A NotFound or InvalidArgument answer is returned as it is while the client has
// received nothing (started false). A replica that may not relay answers with notOwner.
func (s *Server) follow(stream grpc.ServerStream, k ServiceKey, started func() bool,
	local func(*ringView) error, relay func(ring.Member, *ringView) error) error {
	ctx := stream.Context()
	backoff := newBackoff()
	var prev *ringView
	for {
		v := s.own.load()
		if v != prev {
			// A new ring: the first retries come quickly again (the new owner may not have
			// the change yet and answer that it does not own k, for a moment).
			backoff.reset()
			prev = v
		}
		owner, isLocal := v.owner(k)
		var err error
		if isLocal {
			err = local(v)
		} else if isForwarded(ctx) || s.cfg.NonOwner == Redirect {
			return s.notOwner(stream, k, owner)
		} else {
			err = relay(owner, v)
		}
		switch {
		case err == nil:
			return nil
		case errors.Is(err, errMoved):
			s.m.handovers.Inc()
			backoff.reset()
			if s.own.load() == v {
				// The index gave k up before the view did: a ring change is loading what
				// it gained, and swaps the view after. Wait for it rather than spin.
				select {
				case <-ctx.Done():
					return nil
				case <-s.stop:
					return errStopping
				case <-v.changed:
				}
			}
			continue
		case ctx.Err() != nil:
			return nil
		}
		switch status.Code(err) {
		case codes.NotFound, codes.InvalidArgument:
			if !started() {
				return err // nothing sent yet: the client gets the owner's answer
			}
		case codes.Unavailable, codes.Unknown, codes.Canceled:
		default:
			return err
		}
		// The owner is gone or not ready (or the service vanished during a handover): keep the
		// client's state and try again, on whatever the ring then says.
		s.log.Debug("stream segment ended; retrying", zap.Stringer("service", k), zap.Error(err))
		if err := backoff.wait(ctx, s.stop, s.own.load().changed); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
	}
}

// getSender sends a Get stream's updates to its client and counts them: updates encoded
// already (raw: this replica's own, encoded from its snapshots, and those relayed as their
// owner encoded them), and updates built as messages (send: a relayed update the scanner
// refused, decoded).
type getSender struct {
	stream grpc.ServerStream
	m      *replicaMetrics
}

func (o getSender) send(u *pb.Update) error {
	if err := o.stream.SendMsg(u); err != nil {
		return err
	}
	o.count(updateKind(u))
	return nil
}

// raw sends an update of kind encoded as b, which the caller may reuse once raw returns: the
// codec copies it (serverCodec).
func (o getSender) raw(b []byte, kind wire.UpdateKind) error {
	if err := o.stream.SendMsg(encodedMessage(b)); err != nil {
		return err
	}
	o.count(kind)
	return nil
}

func (o getSender) count(kind wire.UpdateKind) {
	switch kind {
	case wire.UpdateAdd:
		o.m.updatesSent.WithLabelValues("add").Inc()
	case wire.UpdateRemove:
		o.m.updatesSent.WithLabelValues("remove").Inc()
	case wire.UpdateNoEndpoints:
		o.m.updatesSent.WithLabelValues("no_endpoints").Inc()
	}
}

// backoff spaces retries of a stream segment: 50ms doubling to 2s, woken early by a ring
// change, after which it starts again at 50ms. Bounded by the stream's life.
type backoff struct{ d time.Duration }

func newBackoff() *backoff { return &backoff{d: 50 * time.Millisecond} }

func (b *backoff) reset() { b.d = 50 * time.Millisecond }

func (b *backoff) wait(ctx context.Context, stop <-chan struct{}, changed <-chan struct{}) error {
	t := time.NewTimer(b.d)
	defer t.Stop()
	b.d = min(2*b.d, 2*time.Second)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-stop:
		return errStopping
	case <-changed:
	case <-t.C:
	}
	return nil
}
