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
// The buffer goes to gRPC as a mem.Buffer of largeBuffers, not as a mem.SliceBuffer, so
// that freeing it (once loopy has written it) drops gRPC's last reference to the bytes.
// grpc-go (v1.85.0) puts a written message's list node back into a sync.Pool without
// clearing it, so the node keeps the message's dataFrame, and a SliceBuffer's bytes with
// it, alive for one more collection: half a storm's first updates outlived the collection
// after it (TestLargeBufferFreedOnceWritten).
//
// A Get stream's updates come encoded already (encodedMessage: the replica's own, written
// from its snapshots into a pooled updateBatch, or a relayed one in gRPC's receive buffer),
// and neither buffer outlives SendMsg: writing such a message is its one copy, into that
// buffer of its own when it is large (proto.Size of an encodedMessage is its length).
type serverCodec struct{}

// ownBufferAbove is the size above which a message gets a buffer of its own.
const ownBufferAbove = 4 << 10

// largeBuffers gives the codec a large message's buffer and takes it back once gRPC has
// written it: mem.NopBufferPool allocates each and lets the collector have it back. A
// test swaps it to watch the buffers.
var largeBuffers mem.BufferPool = mem.NopBufferPool{}

func (serverCodec) Marshal(v any) (mem.BufferSlice, error) {
	if m, ok := v.(proto.Message); ok {
		if size := proto.Size(m); size > ownBufferAbove {
			bp := largeBuffers.Get(size)
			b, err := proto.MarshalOptions{UseCachedSize: true}.MarshalAppend((*bp)[:0], m)
			if err != nil {
				largeBuffers.Put(bp)
				return nil, err
			}
			*bp = b
			return mem.BufferSlice{mem.NewBuffer(bp, largeBuffers)}, nil
		}
	}
	return protoCodec.Marshal(v)
}

func (serverCodec) Unmarshal(data mem.BufferSlice, v any) error { return protoCodec.Unmarshal(data, v) }

func (serverCodec) Name() string { return protoCodec.Name() }
