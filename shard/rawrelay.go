package shard

import (
	"context"

	pb "github.com/linkerd/linkerd2-proxy-api/go/destination"
	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	gproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"
)

// A relayed Get passes the owner's updates to its client as the owner encoded them: the
// relay reads of each only what a handover needs (its addresses and their fingerprints, into
// a destclient.Held) and never decodes it into messages, nor encodes it again. A relayed
// GetProfile passes the owner's profiles on as they are too (profileSender.sendEncoded).

// rawUpdate is one Update (or DestinationProfile) as the owner encoded it: a reference to
// gRPC's receive buffers, which free releases.
type rawUpdate struct{ data mem.BufferSlice }

// bytes returns the encoded update (valid until free).
func (m *rawUpdate) bytes() []byte {
	if len(m.data) == 1 {
		return m.data[0].ReadOnlyData()
	}
	return m.data.Materialize()
}

func (m *rawUpdate) free() {
	m.data.Free()
	m.data = nil
}

// relayCodec is the codec of a relayed call (grpc.ForceCodecV2): the request is encoded by
// gRPC's proto codec, and a *rawUpdate response keeps the encoded bytes. It names itself
// "proto", so the owner decodes the request as any other.
type relayCodec struct{}

var protoCodec = encoding.GetCodecV2(gproto.Name)

func (relayCodec) Marshal(v any) (mem.BufferSlice, error) { return protoCodec.Marshal(v) }

func (relayCodec) Unmarshal(data mem.BufferSlice, v any) error {
	if m, ok := v.(*rawUpdate); ok {
		data.Ref() // gRPC frees data when Unmarshal returns; the relay frees it after sending
		m.data = data
		return nil
	}
	return protoCodec.Unmarshal(data, v)
}

func (relayCodec) Name() string { return gproto.Name }

// rawStream is a Get or GetProfile to an owner whose messages are received encoded. Recv's
// message is valid until the next Recv, and must be freed before it.
type rawStream struct {
	cs  grpc.ClientStream
	cur rawUpdate
}

// destStreams are the Destination service's streams by method.
var destStreams = map[string]*grpc.StreamDesc{
	pb.Destination_Get_FullMethodName:        &pb.Destination_ServiceDesc.Streams[0],
	pb.Destination_GetProfile_FullMethodName: &pb.Destination_ServiceDesc.Streams[1],
}

// openRaw sends req to the owner on conn as a call of method (Get or GetProfile) whose
// messages are received encoded.
func openRaw(ctx context.Context, conn grpc.ClientConnInterface, method string, req *pb.GetDestination) (*rawStream, error) {
	cs, err := conn.NewStream(ctx, destStreams[method], method, grpc.ForceCodecV2(relayCodec{}))
	if err != nil {
		return nil, err
	}
	if err := cs.SendMsg(req); err != nil {
		return nil, err
	}
	if err := cs.CloseSend(); err != nil {
		return nil, err
	}
	return &rawStream{cs: cs}, nil
}

func (g *rawStream) Recv() (*rawUpdate, error) {
	if err := g.cs.RecvMsg(&g.cur); err != nil {
		return nil, err
	}
	return &g.cur, nil
}

// encodedMessage is a message that any proto codec writes as b, verbatim: an Empty whose
// unknown fields are b. It lets a server stream send bytes encoded elsewhere; b must stay
// valid until SendMsg returns (which encodes it at once).
func encodedMessage(b []byte) proto.Message {
	e := &emptypb.Empty{}
	e.ProtoReflect().SetUnknown(b)
	return e
}
