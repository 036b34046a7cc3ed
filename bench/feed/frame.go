package feed

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/meridian-mesh/meridian/bench/gen"
	"github.com/meridian-mesh/meridian/translator"
)

// FrameType is the first byte of a frame.
type FrameType byte

// Frame types.
const (
	FrameHello FrameType = iota + 1
	FrameService
	FrameServiceDeleted
	FrameEndpointSlice
	FrameEndpointSliceDeleted
	FrameSynced
	FrameReplayDone
)

var frameNames = [...]string{
	FrameHello:                "hello",
	FrameService:              "service",
	FrameServiceDeleted:       "service-deleted",
	FrameEndpointSlice:        "endpointslice",
	FrameEndpointSliceDeleted: "endpointslice-deleted",
	FrameSynced:               "synced",
	FrameReplayDone:           "replay-done",
}

func (t FrameType) String() string {
	if int(t) < len(frameNames) && frameNames[t] != "" {
		return frameNames[t]
	}
	return fmt.Sprintf("FrameType(%d)", byte(t))
}

// MaxPayload bounds a frame's payload; a larger length is a protocol error (an EndpointSlice
// of 100 endpoints is about 20 KiB).
const MaxPayload = 16 << 20

// Hello is the first frame of a stream.
type Hello struct {
	// Subscriber names the stream in POST /replay.
	Subscriber uint64 `json:"subscriber"`
	// Cluster is the generator's configuration: Pods are synthesized from it.
	Cluster gen.Config `json:"cluster"`
	// DeliverPods asks the source to hand the Pod of every endpoint to the handler (OnPod)
	// before its slice, for replicas that keep pods instead of looking them up.
	DeliverPods bool `json:"deliver_pods,omitempty"`
}

// Event is a decoded frame. Exactly the fields of its Type are set.
type Event struct {
	Type          FrameType
	Hello         *Hello
	Service       *corev1.Service
	EndpointSlice *translator.EndpointSlice
	Token         uint64
	// Skipped is set for an EndpointSlice of a service the handler does not want: it was
	// not decoded past its metadata and is not delivered.
	Skipped bool
}

// AppendFrame appends a frame of type t with payload p to dst.
func AppendFrame(dst []byte, t FrameType, p []byte) []byte {
	dst = append(dst, byte(t))
	dst = binary.AppendUvarint(dst, uint64(len(p)))
	return append(dst, p...)
}

type marshaler interface {
	Size() int
	MarshalToSizedBuffer([]byte) (int, error)
}

// appendObject appends a frame holding m's Kubernetes protobuf encoding, without an
// intermediate copy.
func appendObject(dst []byte, t FrameType, m marshaler) ([]byte, error) {
	n := m.Size()
	dst = append(dst, byte(t))
	dst = binary.AppendUvarint(dst, uint64(n))
	start := len(dst)
	dst = append(dst, make([]byte, n)...)
	if _, err := m.MarshalToSizedBuffer(dst[start:]); err != nil {
		return dst[:start], fmt.Errorf("encode %s: %w", t, err)
	}
	return dst, nil
}

// AppendService appends a Service frame (deleted: a ServiceDeleted frame).
func AppendService(dst []byte, s *corev1.Service, deleted bool) ([]byte, error) {
	t := FrameService
	if deleted {
		t = FrameServiceDeleted
	}
	return appendObject(dst, t, s)
}

// AppendEndpointSlice appends an EndpointSlice frame (deleted: EndpointSliceDeleted).
func AppendEndpointSlice(dst []byte, es *discoveryv1.EndpointSlice, deleted bool) ([]byte, error) {
	t := FrameEndpointSlice
	if deleted {
		t = FrameEndpointSliceDeleted
	}
	return appendObject(dst, t, es)
}

// AppendHello appends a Hello frame.
func AppendHello(dst []byte, h Hello) []byte {
	b, _ := json.Marshal(h) // plain struct: cannot fail
	return AppendFrame(dst, FrameHello, b)
}

// AppendReplayDone appends a ReplayDone frame for token.
func AppendReplayDone(dst []byte, token uint64) []byte {
	return AppendFrame(dst, FrameReplayDone, binary.AppendUvarint(nil, token))
}

// Reader reads frames from a stream.
type Reader struct {
	r   *bufio.Reader
	buf []byte
}

// NewReader returns a Reader on r.
func NewReader(r io.Reader) *Reader { return &Reader{r: bufio.NewReaderSize(r, 64<<10)} }

// Next returns the next frame's type and payload. The payload is valid until the next call.
// At a clean end of stream it returns io.EOF; a stream cut inside a frame gives
// io.ErrUnexpectedEOF.
func (r *Reader) Next() (FrameType, []byte, error) {
	tb, err := r.r.ReadByte()
	if err != nil {
		return 0, nil, err
	}
	n, err := binary.ReadUvarint(r.r)
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return 0, nil, fmt.Errorf("frame length: %w", err)
	}
	if n > MaxPayload {
		return 0, nil, fmt.Errorf("frame of %d bytes exceeds the limit of %d", n, MaxPayload)
	}
	if uint64(cap(r.buf)) < n {
		r.buf = make([]byte, n)
	}
	r.buf = r.buf[:n]
	if _, err := io.ReadFull(r.r, r.buf); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return 0, nil, fmt.Errorf("%s frame: %w", FrameType(tb), err)
	}
	return FrameType(tb), r.buf, nil
}

// Decode decodes one frame. Objects are checked for what the source relies on (a name and
// namespace); an unknown type is an error. An EndpointSlice comes in the form
// translator.SlimEndpointSlice gives (see decodeSlimEndpointSlice).
func Decode(t FrameType, p []byte) (Event, error) { return decode(t, p, nil, nil) }

// decode is Decode sharing recurring strings through in (nil: none). When want is not nil
// and says no to an EndpointSlice's service, the event has no EndpointSlice (Skipped is set).
func decode(t FrameType, p []byte, in *interner, want func(namespace, service string) bool) (Event, error) {
	ev := Event{Type: t}
	switch t {
	case FrameHello:
		var h Hello
		if err := json.Unmarshal(p, &h); err != nil {
			return ev, fmt.Errorf("hello: %w", err)
		}
		if err := h.Cluster.Validate(); err != nil {
			return ev, fmt.Errorf("hello: cluster: %w", err)
		}
		ev.Hello = &h
	case FrameService, FrameServiceDeleted:
		s := &corev1.Service{}
		if err := s.Unmarshal(p); err != nil {
			return ev, fmt.Errorf("%s: %w", t, err)
		}
		if s.Name == "" || s.Namespace == "" {
			return ev, fmt.Errorf("%s: object without name or namespace", t)
		}
		ev.Service = s
	case FrameEndpointSlice, FrameEndpointSliceDeleted:
		es, err := decodeSlimEndpointSlice(p, in, want)
		if err != nil {
			return ev, fmt.Errorf("%s: %w", t, err)
		}
		if es == nil {
			ev.Skipped = true
			return ev, nil
		}
		if es.Name == "" || es.Namespace == "" {
			return ev, fmt.Errorf("%s: object without name or namespace", t)
		}
		ev.EndpointSlice = es
	case FrameSynced:
		if len(p) != 0 {
			return ev, fmt.Errorf("synced frame with %d bytes of payload", len(p))
		}
	case FrameReplayDone:
		tok, n := binary.Uvarint(p)
		if n <= 0 || n != len(p) {
			return ev, errors.New("replay-done: bad token")
		}
		ev.Token = tok
	default:
		return ev, fmt.Errorf("unknown frame type %d", byte(t))
	}
	return ev, nil
}
