package shard

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	pb "github.com/linkerd/linkerd2-proxy-api/go/destination"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	corev1 "k8s.io/api/core/v1"

	"github.com/meridian-mesh/meridian/internal/destclient"
	"github.com/meridian-mesh/meridian/ring"
	"github.com/meridian-mesh/meridian/snapshot"
	"github.com/meridian-mesh/meridian/translator"
)

// ForwardedHeader marks a stream relayed by another replica; a replica never relays such a
// stream again (so that replicas whose ring views briefly differ cannot loop).
const ForwardedHeader = "meridian-forwarded"

// Server implements io.linkerd.proxy.destination.Destination over an Index.
type Server struct {
	pb.UnimplementedDestinationServer
	cfg  Config
	r    *Replica
	idx  *Index
	m    *metrics
	log  *zap.Logger
	stop <-chan struct{}
}

var _ pb.DestinationServer = (*Server)(nil)

// errMoved ends one segment of a stream whose service changed owner.
var errMoved = errors.New("service changed owner")

func isForwarded(ctx context.Context) bool {
	md, _ := metadata.FromIncomingContext(ctx)
	return len(md.Get(ForwardedHeader)) > 0
}

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
	t, err := translator.ParseAuthority(s.cfg.Translator, req.GetPath())
	if err != nil {
		return status.Error(codes.InvalidArgument, err.Error())
	}
	k := ServiceKey{t.Namespace, t.Service}
	ctx := stream.Context()
	send := func(u *pb.Update) error {
		if err := stream.Send(u); err != nil {
			return err
		}
		s.countSent(u)
		return nil
	}
	s.m.streams.WithLabelValues("get").Inc()
	defer s.m.streams.WithLabelValues("get").Dec()
	var view *destclient.Held // what the client holds, when a segment elsewhere served it
	return s.follow(stream, k, func() bool { return view != nil && view.Started() },
		func(o *ownership) (err error) {
			view, err = s.serveLocal(ctx, t, k, o, view, send)
			return err
		},
		func(owner ring.Member, o *ownership) (err error) {
			view, err = s.relay(ctx, req, k, owner, o, view, send)
			return err
		})
}

// follow serves one stream for service k in segments, each either local (this replica owns
// k) or relayed to the owner, until the stream ends. A segment that ends because k changed
// owner is followed at once by the next; one that ends because the owner is gone or not ready
// is retried with backoff, keeping what the client holds. A NotFound or InvalidArgument
// answer is returned as it is while the client has received nothing (started false). A
// replica that may not relay answers with notOwner.
func (s *Server) follow(stream grpc.ServerStream, k ServiceKey, started func() bool,
	local func(*ownership) error, relay func(ring.Member, *ownership) error) error {
	ctx := stream.Context()
	backoff := newBackoff()
	for {
		o := s.r.ring.load()
		owner, isLocal := o.owner(k)
		var err error
		if isLocal {
			err = local(o)
		} else if isForwarded(ctx) || s.cfg.NonOwner == Redirect {
			return s.notOwner(stream, k, owner)
		} else {
			err = relay(owner, o)
		}
		switch {
		case err == nil:
			return nil
		case errors.Is(err, errMoved):
			s.m.handovers.Inc()
			backoff.reset()
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
		if err := backoff.wait(ctx, s.stop, s.r.ring.load().changed); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
	}
}

// serveLocal serves a Get from this replica's snapshots until the stream ends or the service
// changes owner (errMoved, with the view the client then holds).
func (s *Server) serveLocal(ctx context.Context, t translator.Target, k ServiceKey, o *ownership, view *destclient.Held, send func(*pb.Update) error) (*destclient.Held, error) {
	svc := s.idx.Service(k)
	if svc == nil {
		if !s.idx.Owns(k) {
			return view, errMoved
		}
		if s.r.loading() {
			return view, status.Errorf(codes.Unavailable, "meridian: service %s is not loaded yet on this replica; retry", k)
		}
		return view, status.Errorf(codes.NotFound, "service %s.%s not found", t.Service, t.Namespace)
	}
	if translator.IsExternalName(svc) {
		return view, status.Errorf(codes.InvalidArgument, "service %s.%s is of type ExternalName (%s) and has no endpoints to discover", t.Service, t.Namespace, svc.Spec.ExternalName)
	}
	sub, release := s.idx.Watch(k, t.Port)
	if sub == nil {
		if !s.idx.Owns(k) {
			return view, errMoved
		}
		return view, status.Errorf(codes.NotFound, "service %s.%s not found", t.Service, t.Namespace)
	}
	defer release()
	st := &streamState{hostname: t.Hostname}
	for {
		select {
		case <-ctx.Done():
			return nil, nil
		case <-s.stop:
			return nil, status.Error(codes.Unavailable, "destination replica shutting down")
		case <-o.changed:
			o = s.r.ring.load()
			if _, local := o.owner(k); !local {
				return viewOf(sub.Base(), t.Hostname), errMoved
			}
			continue
		case <-sub.C():
		}
		for {
			d, ok := sub.Next()
			if !ok {
				break
			}
			var ups []*pb.Update
			if view != nil && d.Initial {
				// The client comes from another replica: send it the difference only.
				var err error
				if ups, err = view.Reconcile(fullUpdate(d.To, t.Hostname)); err != nil {
					return nil, status.Errorf(codes.Internal, "reconcile: %v", err)
				}
				st.init(d.To)
				view = nil
			} else {
				ups = st.encode(d)
			}
			for _, u := range ups {
				if err := send(u); err != nil {
					return nil, err
				}
			}
		}
	}
}

// relay serves a Get by relaying the owner's stream until the stream ends or the service
// changes owner. It returns the view the client holds.
func (s *Server) relay(ctx context.Context, req *pb.GetDestination, k ServiceKey, owner ring.Member, o *ownership, view *destclient.Held, send func(*pb.Update) error) (*destclient.Held, error) {
	if view == nil {
		view = destclient.NewHeld()
	}
	conn, err := s.r.conns.get(owner.Addr)
	if err != nil {
		return view, status.Errorf(codes.Unavailable, "connect to owner %s: %v", owner.Addr, err)
	}
	s.m.forwarded.Inc()
	defer s.m.forwarded.Dec()
	s.m.forwardedTotal.Inc()
	rctx, cancel := context.WithCancel(metadata.AppendToOutgoingContext(ctx, ForwardedHeader, s.r.selfName()))
	type msg struct {
		u   *pb.Update
		err error
	}
	msgs := make(chan msg)
	done := make(chan struct{})
	defer func() { cancel(); <-done }()
	rs, err := pb.NewDestinationClient(conn).Get(rctx, req)
	if err != nil {
		close(done)
		return view, err
	}
	go func() {
		defer close(done)
		for {
			u, err := rs.Recv()
			select {
			case msgs <- msg{u, err}:
			case <-rctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	first := true
	for {
		select {
		case <-ctx.Done():
			return view, nil
		case <-s.stop:
			return view, status.Error(codes.Unavailable, "destination replica shutting down")
		case <-o.changed:
			o = s.r.ring.load()
			if next, local := o.owner(k); local || next.Addr != owner.Addr {
				return view, errMoved
			}
		case m := <-msgs:
			if m.err != nil {
				if errors.Is(m.err, io.EOF) {
					return view, status.Error(codes.Unavailable, "owner ended the stream")
				}
				return view, m.err
			}
			var ups []*pb.Update
			if first {
				first = false
				if ups, err = view.Reconcile(m.u); err != nil {
					return view, status.Errorf(codes.Internal, "reconcile with owner %s: %v", owner.Addr, err)
				}
			} else {
				if err := view.Apply(m.u); err != nil {
					return view, status.Errorf(codes.Internal, "update from owner %s: %v", owner.Addr, err)
				}
				ups = []*pb.Update{m.u}
			}
			for _, u := range ups {
				if err := send(u); err != nil {
					return view, err
				}
			}
		}
	}
}

func (s *Server) countSent(u *pb.Update) {
	switch u.GetUpdate().(type) {
	case *pb.Update_Add:
		s.m.updatesSent.WithLabelValues("add").Inc()
	case *pb.Update_Remove:
		s.m.updatesSent.WithLabelValues("remove").Inc()
	case *pb.Update_NoEndpoints:
		s.m.updatesSent.WithLabelValues("no_endpoints").Inc()
	}
}

// GetProfile streams the profile of a service port: its fully qualified name, the default
// retry budget and whether the port is opaque; a port the Service does not declare gets the
// default profile. A new profile is sent whenever it changes, including when the service
// moves to another owner.
func (s *Server) GetProfile(req *pb.GetDestination, stream pb.Destination_GetProfileServer) error {
	t, err := translator.ParseAuthority(s.cfg.Translator, req.GetPath())
	if err != nil {
		return status.Error(codes.InvalidArgument, err.Error())
	}
	k := ServiceKey{t.Namespace, t.Service}
	ctx := stream.Context()
	s.m.streams.WithLabelValues("get_profile").Inc()
	defer s.m.streams.WithLabelValues("get_profile").Dec()
	var last *pb.DestinationProfile
	send := func(p *pb.DestinationProfile) error {
		if last != nil && proto.Equal(last, p) {
			return nil
		}
		last = p
		return stream.Send(p)
	}
	return s.follow(stream, k, func() bool { return last != nil },
		func(o *ownership) error { return s.profileLocal(ctx, t, k, o, send) },
		func(owner ring.Member, o *ownership) error { return s.profileRelay(ctx, req, k, owner, o, send) })
}

func (s *Server) profileLocal(ctx context.Context, t translator.Target, k ServiceKey, o *ownership, send func(*pb.DestinationProfile) error) error {
	if s.idx.Service(k) == nil {
		if !s.idx.Owns(k) {
			return errMoved
		}
		if s.r.loading() {
			return status.Errorf(codes.Unavailable, "meridian: service %s is not loaded yet on this replica; retry", k)
		}
		return status.Errorf(codes.NotFound, "service %s.%s not found", t.Service, t.Namespace)
	}
	sub, release := s.idx.Watch(k, t.Port)
	if sub == nil {
		if !s.idx.Owns(k) {
			return errMoved
		}
		return status.Errorf(codes.NotFound, "service %s.%s not found", t.Service, t.Namespace)
	}
	defer release()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-s.stop:
			return status.Error(codes.Unavailable, "destination replica shutting down")
		case <-o.changed:
			o = s.r.ring.load()
			if _, local := o.owner(k); !local {
				return errMoved
			}
			continue
		case <-sub.C():
		}
		var latest *snapshot.AddressSet
		for {
			d, ok := sub.Next()
			if !ok {
				break
			}
			latest = d.To
		}
		var endpoint *pb.WeightedAddr
		if t.Hostname != "" {
			for _, e := range latest.Sorted() {
				if e.Hostname == t.Hostname {
					endpoint = weightedAddr(e)
					break
				}
			}
		}
		if err := send(s.profile(t, s.idx.Service(k), endpoint)); err != nil {
			return err
		}
	}
}

func (s *Server) profileRelay(ctx context.Context, req *pb.GetDestination, k ServiceKey, owner ring.Member, o *ownership, send func(*pb.DestinationProfile) error) error {
	conn, err := s.r.conns.get(owner.Addr)
	if err != nil {
		return status.Errorf(codes.Unavailable, "connect to owner %s: %v", owner.Addr, err)
	}
	s.m.forwarded.Inc()
	defer s.m.forwarded.Dec()
	s.m.forwardedTotal.Inc()
	rctx, cancel := context.WithCancel(metadata.AppendToOutgoingContext(ctx, ForwardedHeader, s.r.selfName()))
	defer cancel()
	rs, err := pb.NewDestinationClient(conn).GetProfile(rctx, req)
	if err != nil {
		return err
	}
	// Watch the ring beside the blocking Recv: a change of owner cancels the relay.
	moved := make(chan struct{})
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		for {
			select {
			case <-rctx.Done():
				return
			case <-o.changed:
				o = s.r.ring.load()
				if next, local := o.owner(k); local || next.Addr != owner.Addr {
					close(moved)
					cancel()
					return
				}
			}
		}
	}()
	defer func() { cancel(); <-watchDone }()
	for {
		p, err := rs.Recv()
		if err != nil {
			select {
			case <-moved:
				return errMoved
			default:
			}
			if errors.Is(err, io.EOF) {
				return status.Error(codes.Unavailable, "owner ended the stream")
			}
			return err
		}
		if err := send(p); err != nil {
			return err
		}
	}
}

func (s *Server) profile(t translator.Target, svc *corev1.Service, endpoint *pb.WeightedAddr) *pb.DestinationProfile {
	fqn := fmt.Sprintf("%s.%s.svc.%s", t.Service, t.Namespace, s.cfg.Translator.ClusterDomain)
	if t.Hostname != "" {
		fqn = t.Hostname + "." + fqn
	}
	p := &pb.DestinationProfile{
		FullyQualifiedName: fqn,
		RetryBudget: &pb.RetryBudget{
			RetryRatio:          s.cfg.RetryRatio,
			MinRetriesPerSecond: s.cfg.RetryMinPerSecond,
			Ttl:                 durationpb.New(s.cfg.RetryTTL),
		},
		Endpoint: endpoint,
	}
	if svc != nil && servicePortDeclared(svc, t.Port) {
		p.OpaqueProtocol = translator.IsOpaqueService(s.cfg.Translator, svc, t.Port)
	}
	return p
}

func servicePortDeclared(svc *corev1.Service, port uint32) bool {
	for _, p := range svc.Spec.Ports {
		if uint32(p.Port) == port {
			return true
		}
	}
	return false
}

// backoff spaces retries of a stream segment: 50ms doubling to 2s, woken early by a ring
// change. Bounded by the stream's life.
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
		return status.Error(codes.Unavailable, "destination replica shutting down")
	case <-changed:
	case <-t.C:
	}
	return nil
}
