package feed

import (
	"errors"
	"fmt"
	"io"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meridian-mesh/meridian/translator"
)

// decodeSlimEndpointSlice decodes the Kubernetes protobuf encoding of an EndpointSlice
// straight into translator's projection of it, without building the full object first: its
// not-ready endpoints and the fields the projection drops are parsed (and checked) but not
// kept. A replica decodes every slice change of the cluster, owned or not, so this is most of
// what a change costs it; the full decoding took about 13 allocations per endpoint, this
// takes about three.
//
// What is kept is defined by translator (SlimEndpointSlice and its field list), not here: the
// metadata is projected by translator.SlimEndpointSlice itself, and the ports and endpoints
// are a faster implementation of the same projection, which FuzzSlimEndpointSlice holds to
// it (the result equals translator.SlimEndpointSlice of the generated decoding, for every
// input). Each endpoint's fields are collected as translator.EndpointFields and projected by
// translator's own SliceBuilder.Endpoint, as SlimEndpointSlice projects them.
//
// The metadata, the ports, and an endpoint's hints and deprecated topology (both rare) go
// through the generated decoders, so that they are checked exactly as before; of the hints,
// translator.HintZones keeps the zones.
//
// When want is not nil, it is asked, once the metadata is read, whether the slice's service
// is wanted; if not, the rest is not decoded and the result is nil with no error (the
// framing of the whole message is still checked).
func decodeSlimEndpointSlice(b []byte, in *interner, want func(namespace, service string) bool) (*translator.EndpointSlice, error) {
	d := sliceDecoder{in: in, want: want}
	out, err := d.decode(b)
	if err != nil {
		return nil, fmt.Errorf("proto: EndpointSlice: %w", err)
	}
	return out, nil
}

type sliceDecoder struct {
	in   *interner
	want func(namespace, service string) bool
	// b builds the slice's endpoints; f holds the endpoint being decoded.
	b          translator.SliceBuilder
	f          translator.EndpointFields
	nEndpoints int
}

// The wire primitives below follow the generated (gogo) decoders of k8s.io/api exactly,
// down to their handling of oversized varints, truncated field numbers and groups, so that
// decodeSlimEndpointSlice accepts exactly the inputs the generated decoder accepts.

var (
	errOverflow   = errors.New("integer overflow")
	errLength     = errors.New("negative length")
	errWireType   = errors.New("wrong wire type")
	errEndGroup   = errors.New("unexpected end of group")
	errIllegalTag = errors.New("illegal tag")
)

// varint reads a varint at b[i:] and returns it and the index after it.
func varint(b []byte, i int) (uint64, int, error) {
	var v uint64
	for shift := uint(0); ; shift += 7 {
		if shift >= 64 {
			return 0, 0, errOverflow
		}
		if i >= len(b) {
			return 0, 0, io.ErrUnexpectedEOF
		}
		c := b[i]
		i++
		v |= uint64(c&0x7F) << shift
		if c < 0x80 {
			return v, i, nil
		}
	}
}

// field reads one tag and returns the field number, wire type and the rest of b.
func field(b []byte) (int32, int, []byte, error) {
	w, i, err := varint(b, 0)
	if err != nil {
		return 0, 0, nil, err
	}
	num, typ := int32(w>>3), int(w&7)
	if typ == 4 {
		return 0, 0, nil, errors.New("wire type end group for non-group")
	}
	if num <= 0 {
		return 0, 0, nil, fmt.Errorf("%w %d (wire type %d)", errIllegalTag, num, w)
	}
	return num, typ, b[i:], nil
}

// bytesField reads a length-delimited value of wire type typ from b.
func bytesField(typ int, b []byte) ([]byte, []byte, error) {
	if typ != 2 {
		return nil, nil, errWireType
	}
	n, i, err := varint(b, 0)
	if err != nil {
		return nil, nil, err
	}
	l := int(n)
	if l < 0 || i+l < 0 {
		return nil, nil, errLength
	}
	if i+l > len(b) {
		return nil, nil, io.ErrUnexpectedEOF
	}
	return b[i : i+l], b[i+l:], nil
}

// skip skips the field whose tag starts full, as the generated decoders' skip does, and
// returns what follows it.
func skip(full []byte) ([]byte, error) {
	i, depth := 0, 0
	for i < len(full) {
		w, next, err := varint(full, i)
		if err != nil {
			return nil, err
		}
		i = next
		switch w & 7 {
		case 0:
			if _, i, err = varint(full, i); err != nil {
				return nil, err
			}
		case 1:
			i += 8
		case 2:
			n, next, err := varint(full, i)
			if err != nil {
				return nil, err
			}
			if int(n) < 0 {
				return nil, errLength
			}
			i = next + int(n)
		case 3:
			depth++
		case 4:
			if depth == 0 {
				return nil, errEndGroup
			}
			depth--
		case 5:
			i += 4
		default:
			return nil, fmt.Errorf("illegal wire type %d", w&7)
		}
		if i < 0 {
			return nil, errLength
		}
		if depth == 0 {
			if i > len(full) {
				return nil, io.ErrUnexpectedEOF
			}
			return full[i:], nil
		}
	}
	return nil, io.ErrUnexpectedEOF
}

func (d *sliceDecoder) decode(b []byte) (*translator.EndpointSlice, error) {
	// First the metadata (merged, as repeated occurrences of a message field are), the
	// address type (the last occurrence wins) and the number of endpoints, to size what they
	// are carved from: the endpoints' addresses are parsed for the slice's family.
	var meta metav1.ObjectMeta
	var addressType []byte
	n := 0
	for rest := b; len(rest) > 0; {
		num, typ, r, err := field(rest)
		if err != nil {
			return nil, err
		}
		switch num {
		case 1, 4:
			var v []byte
			if v, rest, err = bytesField(typ, r); err != nil {
				return nil, fmt.Errorf("field %d: %w", num, err)
			}
			if num == 4 {
				addressType = v
			} else if err := meta.Unmarshal(v); err != nil {
				return nil, err
			}
			continue
		case 2:
			n++
		}
		if rest, err = skip(rest); err != nil {
			return nil, err
		}
	}
	if d.want != nil && !d.want(meta.Namespace, meta.Labels[discoveryv1.LabelServiceName]) {
		return nil, nil
	}
	out := &translator.EndpointSlice{AddressType: discoveryv1.AddressType(d.in.string(addressType))}
	d.b = translator.SliceBuilder{AddressType: out.AddressType, Namespace: meta.Namespace}
	keep := out.AddressType == discoveryv1.AddressTypeIPv4 || out.AddressType == discoveryv1.AddressTypeIPv6
	if n > 0 && keep {
		out.Endpoints = make([]translator.SliceEndpoint, 0, n)
	}
	for len(b) > 0 {
		num, typ, r, err := field(b)
		if err != nil {
			return nil, err
		}
		var v []byte
		switch num {
		case 1, 2, 3, 4:
			if v, b, err = bytesField(typ, r); err != nil {
				return nil, fmt.Errorf("field %d: %w", num, err)
			}
		default:
			if b, err = skip(b); err != nil {
				return nil, err
			}
			continue
		}
		switch num {
		case 1, 4: // read above
		case 2:
			ready, err := d.endpoint(v)
			if err != nil {
				return nil, fmt.Errorf("endpoint %d: %w", d.nEndpoints, err)
			}
			d.nEndpoints++
			if !ready || !keep {
				continue
			}
			if e, ok := d.b.Endpoint(&d.f); ok {
				out.Endpoints = append(out.Endpoints, e)
			}
		case 3:
			var p discoveryv1.EndpointPort
			if err := p.Unmarshal(v); err != nil {
				return nil, err
			}
			out.Ports = append(out.Ports, discoveryv1.EndpointPort{Name: p.Name, Protocol: p.Protocol, Port: p.Port})
		}
	}
	head := translator.SlimEndpointSlice(&discoveryv1.EndpointSlice{ObjectMeta: meta})
	out.ObjectMeta, out.Service = head.ObjectMeta, head.Service
	if len(out.Endpoints) == 0 {
		out.Endpoints = nil
	}
	return out, nil
}

// endpoint decodes one Endpoint into d.f, keeping what the projection reads, and reports
// whether it is ready (the projection keeps only those; ready unset counts as ready).
func (d *sliceDecoder) endpoint(b []byte) (bool, error) {
	f := &d.f
	*f = translator.EndpointFields{Addrs: f.Addrs[:0]}
	var hints *discoveryv1.EndpointHints
	ready := true
	restChecked := false
	for len(b) > 0 {
		at := b
		num, typ, r, err := field(b)
		if err != nil {
			return false, err
		}
		var v []byte
		switch num {
		case 1, 2, 3, 4, 5, 6, 7, 8:
			if v, b, err = bytesField(typ, r); err != nil {
				return false, fmt.Errorf("field %d: %w", num, err)
			}
		default:
			if b, err = skip(b); err != nil {
				return false, err
			}
			continue
		}
		switch num {
		case 1: // addresses: those of the slice's family
			if a, ok := d.b.ParseAddr(string(v)); ok {
				f.Addrs = append(f.Addrs, a)
			}
		case 2: // conditions: only ready matters
			if ready, err = d.ready(ready, v); err != nil {
				return false, fmt.Errorf("conditions: %w", err)
			}
		case 3: // hostname
			f.Hostname = string(v)
		case 4: // targetRef: kind, namespace and name (occurrences merge)
			f.Ref = true
			if err := d.targetRef(f, v); err != nil {
				return false, fmt.Errorf("targetRef: %w", err)
			}
		case 5: // deprecatedTopology: checked, not kept
			// Checked by the generated decoder from this field to the endpoint's end, once:
			// it reads a map entry's last key or value past the entry, up to the end of the
			// endpoint, so the entry alone can fail where the whole endpoint does not.
			if !restChecked {
				restChecked = true
				var e discoveryv1.Endpoint
				if err := e.Unmarshal(at); err != nil {
					return false, err
				}
			}
		case 6: // nodeName: not kept
		case 7: // zone
			f.Zone = d.in.stringPtr(v)
		case 8: // hints: their zones, as translator.HintZones keeps them (occurrences merge)
			if hints == nil {
				hints = &discoveryv1.EndpointHints{}
			}
			if err := hints.Unmarshal(v); err != nil {
				return false, err
			}
		}
	}
	f.ForZones = translator.HintZones(hints)
	return ready, nil
}

// ready decodes EndpointConditions, merging into the ready seen so far (a later occurrence of
// the field overrides it).
func (d *sliceDecoder) ready(ready bool, b []byte) (bool, error) {
	for len(b) > 0 {
		num, typ, r, err := field(b)
		if err != nil {
			return false, err
		}
		switch num {
		case 1, 2, 3:
			if typ != 0 {
				return false, fmt.Errorf("field %d: %w", num, errWireType)
			}
			v, n, err := varint(r, 0)
			if err != nil {
				return false, err
			}
			if num == 1 {
				ready = v != 0
			}
			b = r[n:]
		default:
			if b, err = skip(b); err != nil {
				return false, err
			}
		}
	}
	return ready, nil
}

// targetRef decodes an ObjectReference into f's reference, merging, keeping kind,
// namespace and name.
func (d *sliceDecoder) targetRef(f *translator.EndpointFields, b []byte) error {
	for len(b) > 0 {
		num, typ, r, err := field(b)
		if err != nil {
			return err
		}
		if num < 1 || num > 7 {
			if b, err = skip(b); err != nil {
				return err
			}
			continue
		}
		var v []byte
		if v, b, err = bytesField(typ, r); err != nil {
			return fmt.Errorf("field %d: %w", num, err)
		}
		switch num {
		case 1:
			f.RefKind = d.in.string(v)
		case 2:
			f.RefNamespace = d.in.string(v)
		case 3:
			f.RefName = string(v)
		}
	}
	return nil
}

// interner shares the strings that recur across objects (kinds, namespaces, zones, address
// types), up to a bound, so that each slice does not allocate its own copies. Not safe for
// concurrent use: a Source decodes on one goroutine.
type interner struct {
	strs map[string]string
	ptrs map[string]*string
}

// maxInterned bounds each of an interner's maps.
const maxInterned = 4096

func newInterner() *interner {
	return &interner{strs: map[string]string{}, ptrs: map[string]*string{}}
}

// string returns string(b), shared when it was seen before.
func (in *interner) string(b []byte) string {
	if in == nil {
		return string(b)
	}
	if s, ok := in.strs[string(b)]; ok { // no allocation for the lookup
		return s
	}
	s := string(b)
	if len(in.strs) < maxInterned {
		in.strs[s] = s
	}
	return s
}

// stringPtr returns a pointer to string(b), shared when it was seen before: whoever reads the
// objects must not write through it (nobody writes to a source's objects).
func (in *interner) stringPtr(b []byte) *string {
	if in == nil {
		s := string(b)
		return &s
	}
	if p, ok := in.ptrs[string(b)]; ok {
		return p
	}
	s := in.string(b)
	p := &s
	if len(in.ptrs) < maxInterned {
		in.ptrs[s] = p
	}
	return p
}
