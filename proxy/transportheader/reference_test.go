package transportheader

import (
	"bytes"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
)

// headerDescriptor is linkerd2-proxy's header.proto, built as a descriptor so that the
// reference protobuf implementation (dynamicpb) can check the hand-written codec.
func headerDescriptor(t testing.TB) protoreflect.MessageDescriptor {
	t.Helper()
	s := proto.String
	field := func(name string, num int32, typ descriptorpb.FieldDescriptorProto_Type, msg string) *descriptorpb.FieldDescriptorProto {
		f := &descriptorpb.FieldDescriptorProto{Name: s(name), JsonName: s(name), Number: proto.Int32(num), Type: typ.Enum(),
			Label: descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum()}
		if msg != "" {
			f.TypeName = s(msg)
		}
		return f
	}
	msgT := descriptorpb.FieldDescriptorProto_TYPE_MESSAGE
	http1 := field("http1", 1, msgT, ".transport.l5d.io.SessionProtocol.Http1")
	http2 := field("http2", 2, msgT, ".transport.l5d.io.SessionProtocol.Http2")
	http1.OneofIndex, http2.OneofIndex = proto.Int32(0), proto.Int32(0)
	fdp := &descriptorpb.FileDescriptorProto{
		Name: s("header.proto"), Package: s("transport.l5d.io"), Syntax: s("proto3"),
		MessageType: []*descriptorpb.DescriptorProto{
			{Name: s("Header"), Field: []*descriptorpb.FieldDescriptorProto{
				field("port", 1, descriptorpb.FieldDescriptorProto_TYPE_INT32, ""),
				field("name", 2, descriptorpb.FieldDescriptorProto_TYPE_STRING, ""),
				field("session_protocol", 3, msgT, ".transport.l5d.io.SessionProtocol"),
			}},
			{Name: s("SessionProtocol"),
				NestedType: []*descriptorpb.DescriptorProto{{Name: s("Http1")}, {Name: s("Http2")}},
				OneofDecl:  []*descriptorpb.OneofDescriptorProto{{Name: s("kind")}},
				Field:      []*descriptorpb.FieldDescriptorProto{http1, http2}},
		},
	}
	fd, err := protodesc.NewFile(fdp, nil)
	if err != nil {
		t.Fatal(err)
	}
	return fd.Messages().ByName("Header")
}

// reference encodes h with the reference implementation.
func reference(t testing.TB, md protoreflect.MessageDescriptor, h Header) []byte {
	t.Helper()
	m := dynamicpb.NewMessage(md)
	if h.Port != 0 {
		m.Set(md.Fields().ByName("port"), protoreflect.ValueOfInt32(int32(h.Port)))
	}
	if h.Name != "" {
		m.Set(md.Fields().ByName("name"), protoreflect.ValueOfString(h.Name))
	}
	if h.Protocol != Opaque {
		spf := md.Fields().ByName("session_protocol")
		sp := dynamicpb.NewMessage(spf.Message())
		kind := spf.Message().Fields().ByNumber(protoreflect.FieldNumber(h.Protocol))
		sp.Set(kind, protoreflect.ValueOfMessage(dynamicpb.NewMessage(kind.Message())))
		m.Set(spf, protoreflect.ValueOfMessage(sp))
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// fromReference decodes msg with the reference implementation.
func fromReference(md protoreflect.MessageDescriptor, msg []byte) (Header, error) {
	m := dynamicpb.NewMessage(md)
	if err := proto.Unmarshal(msg, m); err != nil {
		return Header{}, err
	}
	h := Header{Port: uint16(m.Get(md.Fields().ByName("port")).Int()), Name: m.Get(md.Fields().ByName("name")).String()}
	spf := md.Fields().ByName("session_protocol")
	if m.Has(spf) {
		sp := m.Get(spf).Message()
		if which := sp.WhichOneof(spf.Message().Oneofs().ByName("kind")); which != nil {
			h.Protocol = SessionProtocol(which.Number())
		}
	}
	return h, nil
}

func TestAgainstReferenceProtobuf(t *testing.T) {
	md := headerDescriptor(t)
	for _, h := range []Header{
		{Port: 1},
		{Port: 4040, Name: "foo.bar.example.com", Protocol: HTTP2},
		{Port: 8080, Name: "web.shop.svc.cluster.local", Protocol: HTTP1},
		{Port: 65535, Name: "a"},
		{Port: 300, Protocol: HTTP2},
	} {
		want := reference(t, md, h)
		if got := Encode(h)[len(Preface)+4:]; !bytes.Equal(got, want) {
			t.Errorf("Encode(%+v) message\n got %x\nwant %x (reference)", h, got, want)
		}
		if back, err := fromReference(md, Encode(h)[len(Preface)+4:]); err != nil || back != h {
			t.Errorf("reference decode of Encode(%+v) = %+v, %v", h, back, err)
		}
		if got, err := Read(bytes.NewReader(frame(want))); err != nil || got != h {
			t.Errorf("Read(reference %+v) = %+v, %v", h, got, err)
		}
	}
}
