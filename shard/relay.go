package shard

import (
	"context"
	"errors"
	"io"

	pb "github.com/linkerd/linkerd2-proxy-api/go/destination"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/meridian-mesh/meridian/internal/destclient"
	"github.com/meridian-mesh/meridian/internal/wire"
	"github.com/meridian-mesh/meridian/ring"
)

// ForwardedHeader marks a stream relayed by another replica; a replica never relays such a
// stream again (so that replicas whose ring views briefly differ cannot loop).
const ForwardedHeader = "meridian-forwarded"

// errStopping ends a stream segment when the replica stops; clients reconnect.
var errStopping = status.Error(codes.Unavailable, "destination replica shutting down")

// relay relays streams for services other replicas own to their owners, over one shared
// connection per owner.
type relay struct {
	conns *connPool
	own   *ownership
	m     *replicaMetrics
}

func isForwarded(ctx context.Context) bool {
	md, _ := metadata.FromIncomingContext(ctx)
	return len(md.Get(ForwardedHeader)) > 0
}

// get relays a Get to owner until the stream ends or k changes owner (errMoved). The
// owner's updates go to the client as the owner encoded them (out.raw), while the relay
// records in view what the client then holds (nil when it holds nothing yet). A stream that
// moved here from elsewhere has its first update decoded and reconciled with view, so that it
// receives only the difference. It returns the view the client then holds.
func (rl *relay) get(ctx context.Context, req *pb.GetDestination, k ServiceKey, owner ring.Member, v *ringView,
	view *destclient.Held, out getSender) (*destclient.Held, error) {
	if view == nil {
		view = destclient.NewHeld()
	}
	reconcile := view.Started()
	err := relayStream(rl, ctx, k, owner, v,
		func(ctx context.Context, conn *grpc.ClientConn) (receiver[rawUpdate], error) {
			return openRaw(ctx, conn, pb.Destination_Get_FullMethodName, req)
		},
		func(m *rawUpdate) error {
			defer m.free()
			b := m.bytes()
			if !reconcile {
				kind, err := view.ApplyRaw(b)
				if err == nil {
					return out.raw(b, kind)
				}
				if !errors.Is(err, wire.ErrNonCanonical) {
					return status.Errorf(codes.Internal, "update from owner %s: %v", owner.Addr, err)
				}
			}
			return rl.decoded(b, view, &reconcile, owner, out)
		})
	return view, err
}

// decoded relays an update of the owner's that the relay decodes: the first of a stream that
// moved here (*reconcile: reconciled with view, what the client holds), or one not
// canonically encoded.
func (rl *relay) decoded(b []byte, view *destclient.Held, reconcile *bool, owner ring.Member, out getSender) error {
	u := &pb.Update{}
	if err := proto.Unmarshal(b, u); err != nil {
		return status.Errorf(codes.Internal, "update from owner %s: %v", owner.Addr, err)
	}
	ups := []*pb.Update{u}
	if *reconcile {
		*reconcile = false
		var err error
		if ups, err = view.Reconcile(u); err != nil {
			return status.Errorf(codes.Internal, "reconcile with owner %s: %v", owner.Addr, err)
		}
	} else if err := view.Apply(u); err != nil {
		return status.Errorf(codes.Internal, "update from owner %s: %v", owner.Addr, err)
	}
	for _, u := range ups {
		if err := out.send(u); err != nil {
			return err
		}
	}
	return nil
}

// profile relays a GetProfile to owner until the stream ends or k changes owner (errMoved):
// the owner's profiles go to the client as the owner encoded them, never decoded here, once
// their framing is checked (wire.CheckFraming).
func (rl *relay) profile(ctx context.Context, req *pb.GetDestination, k ServiceKey, owner ring.Member, v *ringView,
	out *profileSender) error {
	return relayStream(rl, ctx, k, owner, v,
		func(ctx context.Context, conn *grpc.ClientConn) (receiver[rawUpdate], error) {
			return openRaw(ctx, conn, pb.Destination_GetProfile_FullMethodName, req)
		},
		func(m *rawUpdate) error {
			defer m.free()
			b := m.bytes()
			if err := wire.CheckFraming(b); err != nil {
				return status.Errorf(codes.Internal, "profile from owner %s: %v", owner.Addr, err)
			}
			return out.sendEncoded(b)
		})
}

// relayStream opens the server stream open makes on owner's connection, marked with
// ForwardedHeader, and hands each message to recv (on the calling goroutine) until the
// client's stream ends (nil), the owner's ends (its error; EOF becomes Unavailable), recv
// fails, the replica stops (Unavailable) or the ring moves k away from owner (errMoved).
//
// The ring and the replica's stop are watched beside the blocking Recv without a goroutine
// per stream: ownership cancels the relayed call with the reason (a moveWatch).
func relayStream[T any](rl *relay, ctx context.Context, k ServiceKey, owner ring.Member, v *ringView,
	open func(context.Context, *grpc.ClientConn) (receiver[T], error),
	recv func(*T) error) error {
	conn, err := rl.conns.get(owner.Addr)
	if err != nil {
		return status.Errorf(codes.Unavailable, "connect to owner %s: %v", owner.Addr, err)
	}
	rl.m.forwarded.Inc()
	defer rl.m.forwarded.Dec()
	rl.m.forwardedTotal.Inc()
	rctx, cancel := context.WithCancelCause(metadata.AppendToOutgoingContext(ctx, ForwardedHeader, rl.own.self))
	defer cancel(nil)
	w := &moveWatch{k: k, owner: owner.Addr, cancel: cancel}
	rl.own.watch(w, v)
	defer rl.own.unwatch(w)
	rs, err := open(rctx, conn)
	for err == nil {
		var msg *T
		if msg, err = rs.Recv(); err == nil {
			if err := recv(msg); err != nil {
				return err
			}
		}
	}
	switch cause := context.Cause(rctx); {
	case ctx.Err() != nil:
		return nil // the client went away
	case errors.Is(cause, errMoved), errors.Is(cause, errStopping):
		return cause
	case errors.Is(err, io.EOF):
		return status.Error(codes.Unavailable, "owner ended the stream")
	}
	return err
}

// receiver is the receiving side of a relayed server stream.
type receiver[T any] interface{ Recv() (*T, error) }
