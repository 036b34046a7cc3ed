package bench

import (
	"errors"
	"fmt"
	"net/netip"
	"sync"

	pb "github.com/linkerd/linkerd2-proxy-api/go/destination"
	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	"github.com/meridian-mesh/meridian/internal/wire"
)

// serverStream describes the Get and GetProfile methods for grpc.ClientConn.NewStream.
var serverStream = grpc.StreamDesc{ServerStreams: true}

// frameCodec is the codec of the harness's streams: it encodes the request as protobuf (it
// is named "proto", so the server reads it as usual) and hands each message received over as
// its encoded bytes, undecoded, in a *frame. gRPC decodes a message before RecvMsg returns,
// so with the generated client a stream's first message would be seen only after it was
// decoded, behind the decoding of every other stream's: the time would measure the harness.
type frameCodec struct{}

var _ encoding.CodecV2 = frameCodec{}

func (frameCodec) Name() string { return "proto" }

func (frameCodec) Marshal(v any) (mem.BufferSlice, error) {
	m, ok := v.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("frame codec: cannot encode a %T", v)
	}
	b, err := proto.Marshal(m)
	if err != nil {
		return nil, err
	}
	return mem.BufferSlice{mem.SliceBuffer(b)}, nil
}

// Unmarshal keeps a reference on the message's buffer (gRPC frees data when Unmarshal
// returns); a message that came in several buffers is copied into one from gRPC's pool.
func (frameCodec) Unmarshal(data mem.BufferSlice, v any) error {
	f, ok := v.(*frame)
	if !ok {
		return fmt.Errorf("frame codec: cannot decode into a %T", v)
	}
	f.buf = data.MaterializeToBuffer(mem.DefaultBufferPool())
	return nil
}

// frame is one received message, encoded. Its bytes are valid until free.
type frame struct{ buf mem.Buffer }

func (f *frame) bytes() []byte { return f.buf.ReadOnlyData() }

func (f *frame) free() {
	if f.buf != nil {
		f.buf.Free()
		f.buf = nil
	}
}

// keyScratch holds an update's addresses while applyEncoded reads it (maxKeyScratch at the
// most are kept).
var keyScratch = sync.Pool{New: func() any { return new([]wire.AddrKey) }}

const maxKeyScratch = 4096

// applyEncoded applies one encoded Update as apply applies it decoded, reading only its
// addresses with wire.ScanUpdate: the metric labels, identities and hints, which the
// harness never reads, are skipped, not decoded. It gathers the addresses first and applies
// them once the whole update has been read, so that an update ScanUpdate refuses (one a
// decoder would merge, or malformed) leaves the view untouched; that one is decoded with
// proto.Unmarshal and given to apply, so that whatever a decoder accepts is applied exactly
// as before. A Remove of an address not held, an update of no known kind, and bytes the
// decoder refuses are errors. An Add to an empty view makes the view at its size.
func (v *addrView) applyEncoded(b []byte, seen func(ap netip.AddrPort, added bool)) error {
	scratch := keyScratch.Get().(*[]wire.AddrKey)
	keys := (*scratch)[:0]
	defer func() {
		if cap(keys) <= maxKeyScratch {
			*scratch = keys[:0]
			keyScratch.Put(scratch)
		}
	}()
	kind, _, err := wire.ScanUpdate(b, func(k wire.AddrKey, _ []byte) error {
		keys = append(keys, k)
		return nil
	})
	if err != nil {
		var u pb.Update
		if uerr := proto.Unmarshal(b, &u); uerr != nil {
			return fmt.Errorf("decode update (scan: %v): %w", err, uerr)
		}
		return v.apply(&u, seen)
	}
	switch kind {
	case wire.UpdateAdd:
		if len(*v) == 0 {
			*v = make(addrView, len(keys))
		}
		for _, k := range keys {
			(*v)[k] = struct{}{}
			if seen != nil {
				seen(k.AddrPort(), true)
			}
		}
	case wire.UpdateRemove:
		for _, k := range keys {
			if _, ok := (*v)[k]; !ok {
				return fmt.Errorf("remove of %s, which was never added", k.AddrPort())
			}
			delete(*v, k)
			if seen != nil {
				seen(k.AddrPort(), false)
			}
		}
	case wire.UpdateNoEndpoints:
		clear(*v)
	default:
		return errors.New("update of no known kind")
	}
	return nil
}
