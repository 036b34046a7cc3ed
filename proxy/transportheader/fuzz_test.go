package transportheader

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"
)

// FuzzRead checks that Read never panics; that what it accepts is valid, was consumed
// exactly, re-encodes to a header that reads back equal, and agrees with the reference
// protobuf decoder on the fields.
func FuzzRead(f *testing.F) {
	f.Add(Encode(Header{Port: 4040, Name: "foo.bar.example.com", Protocol: HTTP2}))
	f.Add(Encode(Header{Port: 80, Protocol: HTTP1}))
	f.Add(append(Encode(Header{Port: 1}), "12345"...))
	f.Add([]byte("GET / HTTP/1.1\r\n\r\n"))
	f.Add(frame([]byte{0x08, 80, 0x1a, 0x03, 0x0a, 0x01, 0xff}))
	f.Add(frame([]byte{0x3b, 0x08, 0x01, 0x3c, 0x08, 80}))
	f.Add([]byte(Preface))
	md := headerDescriptor(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bytes.NewReader(data)
		h, err := Read(r)
		if err != nil {
			if len(err.Error()) > 200 {
				t.Fatalf("error quotes too much: %q", err)
			}
			return
		}
		if err := h.Validate(); err != nil {
			t.Fatalf("Read accepted %+v, which Validate rejects: %v", h, err)
		}
		consumed := len(data) - r.Len()
		size := int(binary.BigEndian.Uint32(data[len(Preface):]))
		if consumed != len(Preface)+4+size {
			t.Fatalf("consumed %d bytes of a %d-byte header", consumed, len(Preface)+4+size)
		}
		if again, err := Read(bytes.NewReader(Encode(h))); err != nil || again != h {
			t.Fatalf("Read(Encode(%+v)) = %+v, %v", h, again, err)
		}
		ref, err := fromReference(md, data[len(Preface)+4:consumed])
		if err == nil && (ref.Port != h.Port || strings.ToLower(ref.Name) != h.Name || ref.Protocol != h.Protocol) {
			t.Fatalf("Read = %+v, reference decoder = %+v", h, ref)
		}
	})
}

// FuzzRoundTrip checks Read(Encode(h)) == h (name lowercased) for every valid h, and that
// Read refuses the encoding of every invalid one.
func FuzzRoundTrip(f *testing.F) {
	f.Add(uint16(4040), "foo.bar.example.com", uint8(2))
	f.Add(uint16(0), "", uint8(0))
	f.Add(uint16(80), "Web.Shop.", uint8(1))
	f.Add(uint16(80), "1.2.3.4", uint8(1))
	f.Fuzz(func(t *testing.T, port uint16, name string, proto uint8) {
		h := Header{Port: port, Name: name, Protocol: SessionProtocol(proto % 3)}
		got, err := Read(bytes.NewReader(Encode(h)))
		if verr := h.Validate(); verr != nil {
			if err == nil {
				t.Fatalf("Read accepted %+v (%+v), which Validate rejects: %v", h, got, verr)
			}
			return
		}
		want := h
		want.Name = strings.ToLower(h.Name)
		if err != nil || got != want {
			t.Fatalf("Read(Encode(%+v)) = %+v, %v; want %+v", h, got, err, want)
		}
	})
}
