package h2

import (
	"reflect"
	"testing"

	"golang.org/x/net/http2/hpack"
)

// FuzzHeaderBlock decodes arbitrary header blocks as a request's, a response's and trailers.
// It never panics; a block it accepts also decodes with x/net's HPACK decoder (the
// reference) to the same fields in the same order, holds only valid fields, and comes back
// the same after the relay's encoder re-encodes it.
func FuzzHeaderBlock(f *testing.F) {
	enc := newEncoder()
	for _, s := range []struct {
		h    *Header
		kind blockKind
	}{
		{&Header{Method: "GET", Scheme: "http", Authority: "web", Path: "/", Fields: []hpack.HeaderField{{Name: "x-a", Value: "1"}}}, requestBlock},
		{&Header{Method: "CONNECT", Authority: "web:80"}, requestBlock},
		{&Header{Method: "CONNECT", Protocol: "websocket", Scheme: "https", Authority: "web", Path: "/chat"}, requestBlock},
		{&Header{Method: "OPTIONS", Scheme: "http", Path: "*"}, requestBlock},
		{&Header{Method: "POST", Scheme: "http", Path: "/", Fields: []hpack.HeaderField{{Name: "content-length", Value: "5"}, {Name: "te", Value: "trailers"}}}, requestBlock},
		{&Header{Status: 200, Fields: []hpack.HeaderField{{Name: "content-type", Value: "application/grpc"}}}, responseBlock},
		{&Header{Fields: []hpack.HeaderField{{Name: "grpc-status", Value: "0"}, {Name: "grpc-message", Value: "a\tb"}}}, trailersBlock},
	} {
		f.Add(append([]byte(nil), enc.encode(s.h, s.kind, nil)...), uint8(s.kind))
	}
	f.Add([]byte{0x82, 0x86, 0x84, 0x41, 0x03, 'w', 'e', 'b'}, uint8(requestBlock))
	f.Add([]byte{0x88, 0x40, 0x0a, 'c', 'o', 'n', 'n', 'e', 'c', 't', 'i', 'o', 'n', 0x05, 'c', 'l', 'o', 's', 'e'}, uint8(responseBlock))
	f.Add([]byte{0x3f, 0xe1, 0x1f}, uint8(trailersBlock))                // a dynamic table size update
	f.Add([]byte{0x00, 0x01, 'X', 0x01, 'y'}, uint8(trailersBlock))      // an uppercase name
	f.Add([]byte{0x00, 0x01, 'x', 0x02, ' ', 'y'}, uint8(trailersBlock)) // leading whitespace
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0x0f}, uint8(requestBlock))
	f.Fuzz(func(t *testing.T, block []byte, k uint8) {
		kind := blockKind(k % 3)
		var h Header
		const limit = 16 << 10
		if err := newDecoder(limit).decode(block, kind, &h); err != nil {
			return
		}
		var ref []hpack.HeaderField
		refDec := hpack.NewDecoder(4096, func(f hpack.HeaderField) { ref = append(ref, f) })
		refDec.SetMaxStringLength(limit)
		if _, err := refDec.Write(block); err != nil {
			t.Fatalf("accepted a block the reference refuses: %v", err)
		}
		if err := refDec.Close(); err != nil {
			t.Fatalf("accepted a block the reference refuses: %v", err)
		}
		var regular []hpack.HeaderField
		for _, f := range ref {
			if !f.IsPseudo() {
				regular = append(regular, hpack.HeaderField{Name: f.Name, Value: f.Value})
			}
		}
		var got []hpack.HeaderField
		for _, f := range h.Fields {
			if !validName(f.Name) || !validValue(f.Value) || connectionSpecific(f) {
				t.Fatalf("accepted field %q: %q", f.Name, f.Value)
			}
			got = append(got, hpack.HeaderField{Name: f.Name, Value: f.Value})
		}
		if !reflect.DeepEqual(got, regular) {
			t.Fatalf("fields %q, the reference decodes %q", got, regular)
		}
		if kind == requestBlock && !validRequest(&h) || kind == responseBlock && (h.Status < 100 || h.Status > 999) {
			t.Fatalf("accepted %+v as kind %d", h, kind)
		}
		again := newEncoder().encode(&h, kind, nil)
		var h2 Header
		if err := newDecoder(limit).decode(again, kind, &h2); err != nil {
			t.Fatalf("re-encoded block of %+v fails: %v", h, err)
		}
		for i := range h.Fields {
			h.Fields[i].Sensitive = false
		}
		for i := range h2.Fields {
			h2.Fields[i].Sensitive = false
		}
		if !reflect.DeepEqual(h, h2) {
			t.Fatalf("round trip:\n%+v\n%+v", h, h2)
		}
	})
}
