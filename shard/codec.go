package shard

import (
	"google.golang.org/grpc"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
)

// ServerOptions are the gRPC server options a destination replica's server should have
// (internal/serve passes them): the replica's codec.
func ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.ForceServerCodecV2(serverCodec{})}
}

// serverCodec is gRPC's proto codec, except that it encodes a large message (a stream's
// first update holds every endpoint of a service: ~14 KiB for 100) into a buffer of its own,
// which the collector frees once it is written, rather than into one of gRPC's shared pool.
// A storm of new streams has each first update waiting for its client's flow control at
// once; the pool would keep every one of those buffers after they are written, until two
// collections later: ~16 KiB per stream that the streams themselves no longer hold.
//
// A Get stream's updates come encoded already (encodedMessage: the replica's own, written
// from its snapshots into a pooled updateBatch, or a relayed one in gRPC's receive buffer),
// and neither buffer outlives SendMsg: writing such a message is its one copy, into that
// buffer of its own when it is large (proto.Size of an encodedMessage is its length).
type serverCodec struct{}

// ownBufferAbove is the size above which a message gets a buffer of its own.
const ownBufferAbove = 4 << 10

func (serverCodec) Marshal(v any) (mem.BufferSlice, error) {
	if m, ok := v.(proto.Message); ok {
		if size := proto.Size(m); size > ownBufferAbove {
			b, err := proto.MarshalOptions{UseCachedSize: true}.MarshalAppend(make([]byte, 0, size), m)
			if err != nil {
				return nil, err
			}
			return mem.BufferSlice{mem.SliceBuffer(b)}, nil
		}
	}
	return protoCodec.Marshal(v)
}

func (serverCodec) Unmarshal(data mem.BufferSlice, v any) error { return protoCodec.Unmarshal(data, v) }

func (serverCodec) Name() string { return protoCodec.Name() }
