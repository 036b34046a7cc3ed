package transportheader

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"google.golang.org/protobuf/encoding/protowire"
)

// frame prefixes a message with the preface and its length.
func frame(msg []byte) []byte {
	b := append([]byte(Preface), 0, 0, 0, 0)
	binary.BigEndian.PutUint32(b[len(Preface):], uint32(len(msg)))
	return append(b, msg...)
}

func hexMsg(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

// TestEncodeKnownBytes pins the wire bytes, worked out by hand from header.proto, for the
// headers linkerd2-proxy's own tests round-trip (roundtrip_prefaced, many_reads).
func TestEncodeKnownBytes(t *testing.T) {
	name := []byte("foo.bar.example.com")
	cases := []struct {
		h   Header
		msg []byte
	}{
		{Header{Port: 4040, Name: "foo.bar.example.com", Protocol: HTTP2},
			hexMsg([]byte{0x08, 0xc8, 0x1f, 0x12, 19}, name, []byte{0x1a, 0x02, 0x12, 0x00})},
		{Header{Port: 4040, Name: "foo.bar.example.com"},
			hexMsg([]byte{0x08, 0xc8, 0x1f, 0x12, 19}, name)},
		{Header{Port: 80, Protocol: HTTP1}, []byte{0x08, 80, 0x1a, 0x02, 0x0a, 0x00}},
		{Header{Port: 65535}, []byte{0x08, 0xff, 0xff, 0x03}},
	}
	for _, tc := range cases {
		got := Encode(tc.h)
		if want := frame(tc.msg); !bytes.Equal(got, want) {
			t.Errorf("Encode(%+v)\n got %x\nwant %x", tc.h, got, want)
		}
		if !bytes.Equal(Append([]byte("x"), tc.h), append([]byte("x"), got...)) {
			t.Errorf("Append(%+v) differs from Encode", tc.h)
		}
	}
}

func TestReadRoundTripLeavesTheStream(t *testing.T) {
	h := Header{Port: 4040, Name: "Foo.Bar.example.com", Protocol: HTTP2}
	stream := append(Encode(h), "12345"...)
	for _, r := range []struct {
		name string
		r    io.Reader
	}{
		{"whole", bytes.NewReader(stream)},
		{"one byte at a time", iotest.OneByteReader(bytes.NewReader(stream))},
		{"half reads", iotest.HalfReader(bytes.NewReader(stream))},
	} {
		got, err := Read(r.r)
		if err != nil {
			t.Fatalf("%s: %v", r.name, err)
		}
		if want := (Header{Port: 4040, Name: "foo.bar.example.com", Protocol: HTTP2}); got != want {
			t.Fatalf("%s: read %+v, want %+v (name lowercased)", r.name, got, want)
		}
		rest, err := io.ReadAll(r.r)
		if err != nil || string(rest) != "12345" {
			t.Fatalf("%s: after the header the stream is %q, %v; want 12345", r.name, rest, err)
		}
	}
}

func TestReadErrors(t *testing.T) {
	tag := protowire.AppendTag
	cases := []struct {
		name  string
		in    []byte
		want  error
		inMsg string // a word the message must contain
	}{
		{"empty", nil, io.EOF, ""},
		{"plain HTTP (linkerd's no_header case)", []byte("GET / HTTP/1.1\r\nHost: example.com\r\n\r\n"), ErrBadPreface, "GET / HTTP/1.1"},
		{"short and wrong", []byte("tls"), ErrBadPreface, ""},
		{"truncated preface", []byte(Preface[:10]), io.ErrUnexpectedEOF, ""},
		{"no length", []byte(Preface), io.ErrUnexpectedEOF, ""},
		{"over the bound", binary.BigEndian.AppendUint32([]byte(Preface), MaxLen+1), ErrTooLong, "65537"},
		{"huge length", binary.BigEndian.AppendUint32([]byte(Preface), 1<<32-1), ErrTooLong, ""},
		{"truncated message", frame([]byte{0x08, 80})[:len(Preface)+5], io.ErrUnexpectedEOF, ""},
		{"no port", frame(nil), ErrBadPort, ": 0"},
		{"port 0", frame([]byte{0x08, 0x00}), ErrBadPort, ""},
		{"negative port", frame(protowire.AppendVarint(tag(nil, 1, protowire.VarintType), uint64(0xffffffffffffffff))), ErrBadPort, "-1"},
		{"port 65536", frame(protowire.AppendVarint(tag(nil, 1, protowire.VarintType), 65536)), ErrBadPort, "65536"},
		{"bad varint", frame([]byte{0x08, 0xff}), ErrMalformed, "port"},
		{"port as bytes", frame([]byte{0x0a, 0x01, 0x50}), ErrMalformed, "wire type"},
		{"name as varint", frame([]byte{0x08, 80, 0x10, 0x01}), ErrMalformed, "wire type"},
		{"name overruns", frame([]byte{0x08, 80, 0x12, 0x05, 'a'}), ErrMalformed, "name"},
		{"field number 0", frame([]byte{0x00, 0x01}), ErrMalformed, "tag"},
		{"stray end group", frame([]byte{0x08, 80, 0x2c}), ErrMalformed, ""},
		{"bad session protocol", frame([]byte{0x08, 80, 0x1a, 0x01, 0x0a}), ErrMalformed, "session_protocol"},
		{"bad kind body", frame([]byte{0x08, 80, 0x1a, 0x03, 0x0a, 0x01, 0xff}), ErrMalformed, "nested"},
		{"name with a space", frame(append([]byte{0x08, 80, 0x12, 3}, "a b"...)), ErrBadName, "a b"},
		{"name is an IP", frame(append([]byte{0x08, 80, 0x12, 7}, "1.2.3.4"...)), ErrBadName, ""},
		{"name not UTF-8", frame(append([]byte{0x08, 80, 0x12, 2}, 0xc3, 0x28)), ErrBadName, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h, err := Read(bytes.NewReader(tc.in))
			if !errors.Is(err, tc.want) {
				t.Fatalf("Read = %+v, %v; want %v", h, err, tc.want)
			}
			if !strings.Contains(err.Error(), tc.inMsg) {
				t.Fatalf("error %q does not mention %q", err, tc.inMsg)
			}
			if len(err.Error()) > 200 {
				t.Fatalf("error quotes too much: %d bytes", len(err.Error()))
			}
		})
	}
}

func TestReadProtobufRules(t *testing.T) {
	tag := protowire.AppendTag
	varint := func(num protowire.Number, v uint64) []byte {
		return protowire.AppendVarint(tag(nil, num, protowire.VarintType), v)
	}
	str := func(num protowire.Number, s string) []byte {
		return protowire.AppendString(tag(nil, num, protowire.BytesType), s)
	}
	group := protowire.AppendTag(tag(nil, 9, protowire.StartGroupType), 9, protowire.EndGroupType)
	cases := []struct {
		name string
		msg  []byte
		want Header
	}{
		{"unknown fields are skipped", hexMsg(varint(7, 1), str(8, "x"), group,
			tag(nil, 10, protowire.Fixed32Type), []byte{1, 2, 3, 4}, varint(1, 80),
			tag(nil, 11, protowire.Fixed64Type), make([]byte, 8)), Header{Port: 80}},
		{"the last port wins", hexMsg(varint(1, 1), varint(1, 443)), Header{Port: 443}},
		{"int32 truncates", varint(1, 1<<32+8080), Header{Port: 8080}},
		{"the last name wins", hexMsg(varint(1, 80), str(2, "a.example"), str(2, "b.example")), Header{Port: 80, Name: "b.example"}},
		{"trailing dot kept", hexMsg(varint(1, 80), str(2, "web.shop.svc.cluster.local.")), Header{Port: 80, Name: "web.shop.svc.cluster.local."}},
		{"empty session protocol is opaque", hexMsg(varint(1, 80), str(3, "")), Header{Port: 80}},
		{"session protocols merge, last kind wins", hexMsg(varint(1, 80), str(3, string(str(1, ""))), str(3, string(str(2, "")))), Header{Port: 80, Protocol: HTTP2}},
		{"an empty later session protocol keeps the kind", hexMsg(varint(1, 80), str(3, string(str(1, ""))), str(3, "")), Header{Port: 80, Protocol: HTTP1}},
		{"unknown fields inside the kind", hexMsg(varint(1, 80), str(3, string(str(1, string(varint(5, 1)))))), Header{Port: 80, Protocol: HTTP1}},
		{"unknown kind ignored", hexMsg(varint(1, 80), str(3, string(str(3, "")))), Header{Port: 80}},
	}
	for _, tc := range cases {
		got, err := Read(bytes.NewReader(frame(tc.msg)))
		if err != nil || got != tc.want {
			t.Errorf("%s: Read = %+v, %v; want %+v", tc.name, got, err, tc.want)
		}
	}
}

func TestValidate(t *testing.T) {
	cases := []struct {
		h    Header
		want error
	}{
		{Header{Port: 1}, nil},
		{Header{Port: 8080, Name: "web.shop.svc.cluster.local", Protocol: HTTP1}, nil},
		{Header{Port: 8080, Name: "_m.foo.bar"}, nil},
		{Header{Port: 8080, Name: "xn--poema-9qae5a.com.br"}, nil},
		{Header{}, ErrBadPort},
		{Header{Port: 80, Name: "-a.b"}, ErrBadName},
		{Header{Port: 80, Name: "a-.b"}, ErrBadName},
		{Header{Port: 80, Name: "a..b"}, ErrBadName},
		{Header{Port: 80, Name: "."}, ErrBadName},
		{Header{Port: 80, Name: "a.1"}, ErrBadName},
		{Header{Port: 80, Name: "example.com:80"}, ErrBadName},
		{Header{Port: 80, Name: strings.Repeat("a", 64) + ".b"}, ErrBadName},
		{Header{Port: 80, Name: strings.Repeat("a.", 127) + "bc"}, ErrBadName}, // 256 bytes
		{Header{Port: 80, Protocol: HTTP2 + 1}, ErrBadProtocol},
	}
	for _, tc := range cases {
		if err := tc.h.Validate(); !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
			t.Errorf("Validate(%+v) = %v, want %v", tc.h, err, tc.want)
		}
	}
}

func BenchmarkEncode(b *testing.B) {
	h := Header{Port: 8080, Name: "web.shop.svc.cluster.local", Protocol: HTTP1}
	buf := make([]byte, 0, 128)
	b.ReportAllocs()
	for b.Loop() {
		buf = Append(buf[:0], h)
	}
}

func BenchmarkRead(b *testing.B) {
	for _, h := range []Header{{Port: 8080, Protocol: HTTP2}, {Port: 8080, Name: "web.shop.svc.cluster.local", Protocol: HTTP1}} {
		b.Run(h.Protocol.String()+map[bool]string{true: "+name", false: ""}[h.Name != ""], func(b *testing.B) {
			wire := Encode(h)
			r := bytes.NewReader(wire)
			b.ReportAllocs()
			for b.Loop() {
				r.Reset(wire)
				if _, err := Read(r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
