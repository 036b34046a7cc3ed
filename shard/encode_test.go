package shard

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"
	"unique"

	pb "github.com/linkerd/linkerd2-proxy-api/go/destination"
	pbnet "github.com/linkerd/linkerd2-proxy-api/go/net"
	"google.golang.org/protobuf/proto"

	"github.com/meridian-mesh/meridian/internal/wire"
	"github.com/meridian-mesh/meridian/snapshot"
)

// genAddr is a random address: IPv4, IPv6 (with zero halves now and then), IPv4-mapped
// IPv6, and now and then port 0 or the address 0.0.0.0.
func genAddr(r *rand.Rand) netip.AddrPort {
	port := uint16(r.IntN(65536))
	if r.IntN(10) == 0 {
		port = 0
	}
	switch r.IntN(6) {
	case 0, 1:
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, byte(r.IntN(256)), byte(r.IntN(256)), byte(r.IntN(256))}), port)
	case 2:
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte{}), port)
	case 3:
		return netip.AddrPortFrom(netip.AddrFrom16([16]byte{10: 0xff, 11: 0xff, 12: 10, 15: byte(r.IntN(256))}), port)
	default:
		var b [16]byte
		for i := range b {
			b[i] = byte(r.IntN(256))
		}
		switch r.IntN(4) {
		case 0:
			clear(b[:8])
		case 1:
			clear(b[8:])
		case 2:
			clear(b[:])
		}
		return netip.AddrPortFrom(netip.AddrFrom16(b), port)
	}
}

// genLabels is 0 to 5 labels sorted by key, with empty values now and then.
func genLabels(r *rand.Rand, prefix string) []snapshot.Label {
	n := r.IntN(6)
	ls := make([]snapshot.Label, 0, n)
	for i := range n {
		v := fmt.Sprintf("value-%d", r.IntN(1000))
		if r.IntN(8) == 0 {
			v = ""
		}
		ls = append(ls, snapshot.Label{Key: fmt.Sprintf("%s%d", prefix, i), Value: v})
	}
	return ls
}

// genEndpoint is a random endpoint: with and without identity, each hint, opaque transport
// ports (with and without a hint), HTTP/2, hostnames and authority overrides, zero weights.
func genEndpoint(r *rand.Rand) *snapshot.Endpoint {
	e := &snapshot.Endpoint{
		Addr:   genAddr(r),
		Weight: []uint32{0, 1, 10000, 1 << 31}[r.IntN(4)],
		Hint:   []snapshot.ProtocolHint{snapshot.HintNone, snapshot.HintH2, snapshot.HintOpaque}[r.IntN(3)],
		HTTP2:  r.IntN(2) == 0,
		Labels: genLabels(r, "label"),
	}
	if r.IntN(2) == 0 { // the pod label, which the encoders slot in among the labels
		e.Pod = fmt.Sprintf("web-%d", r.IntN(100))
	}
	if r.IntN(2) == 0 {
		e.Labels = append(e.Labels, snapshot.Label{Key: "zone", Value: "z1"}) // a label after "pod"
	}
	if r.IntN(2) == 0 {
		e.SetIdentity(fmt.Sprintf("sa-%d.ns.serviceaccount.identity.linkerd.cluster.local", r.IntN(100)))
	}
	if r.IntN(2) == 0 {
		e.OpaqueTransportPort = []uint16{4143, 1, 65535}[r.IntN(3)]
	}
	var hostname, override string
	if r.IntN(4) == 0 {
		hostname = fmt.Sprintf("pod-%d", r.IntN(100))
	}
	if r.IntN(4) == 0 {
		override = fmt.Sprintf("web.ns.svc.cluster.local:%d", r.IntN(65536))
	}
	e.Rare = snapshot.NewRare(hostname, nil, override)
	return e
}

// checkEncoded checks that enc is the encoding of want: that it decodes to an equal message,
// that it is the bytes a deterministic proto.Marshal writes (so that wire.Fingerprint of its
// addresses is what a Held computes from messages), and that wire.ScanUpdate reads
// the kind, existence and addresses of want from it.
func checkEncoded(t *testing.T, what string, enc []byte, want *pb.Update) {
	t.Helper()
	var got pb.Update
	if err := proto.Unmarshal(enc, &got); err != nil {
		t.Fatalf("%s: decode: %v", what, err)
	}
	if !proto.Equal(&got, want) {
		t.Fatalf("%s: decoded\n%v\nwant\n%v", what, &got, want)
	}
	if ref, err := (proto.MarshalOptions{Deterministic: true}).Marshal(want); err != nil || !bytes.Equal(enc, ref) {
		t.Fatalf("%s: bytes differ from proto.Marshal's (%v):\n%x\n%x", what, err, enc, ref)
	}
	var keys []wire.AddrKey
	kind, exists, err := wire.ScanUpdate(enc, func(k wire.AddrKey, wa []byte) error {
		keys = append(keys, k)
		return nil
	})
	if err != nil || kind != updateKind(want) || exists != want.GetNoEndpoints().GetExists() {
		t.Fatalf("%s: scanned kind %d exists %v (%v), want kind %d", what, kind, exists, err, updateKind(want))
	}
	var wantKeys []wire.AddrKey
	for _, a := range want.GetAdd().GetAddrs() {
		wantKeys = append(wantKeys, tcpKey(t, a.GetAddr()))
	}
	for _, a := range want.GetRemove().GetAddrs() {
		wantKeys = append(wantKeys, tcpKey(t, a))
	}
	if fmt.Sprint(keys) != fmt.Sprint(wantKeys) {
		t.Fatalf("%s: scanned addresses %v, want %v", what, keys, wantKeys)
	}
}

func tcpKey(t *testing.T, a *pbnet.TcpAddress) wire.AddrKey {
	t.Helper()
	ap, err := wire.ToAddrPort(a)
	if err != nil {
		t.Fatal(err)
	}
	return wire.KeyOf(ap)
}

// TestAppendAddUpdate checks, on generated sets, that appendAddUpdate writes what
// addUpdate's message is marshalled to, after any bytes already in the buffer.
func TestAppendAddUpdate(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 2000 {
		eps := make([]*snapshot.Endpoint, r.IntN(20))
		if i%100 == 0 {
			eps = make([]*snapshot.Endpoint, 150) // long enough for multi-byte lengths
		}
		for j := range eps {
			eps[j] = genEndpoint(r)
		}
		var setLabels []snapshot.Label
		if r.IntN(2) == 0 {
			setLabels = genLabels(r, "set")
		}
		prefix := []byte("prefix")[:r.IntN(7)]
		b := appendAddUpdate(bytes.Clone(prefix), setLabels, eps)
		if !bytes.HasPrefix(b, prefix) {
			t.Fatalf("set %d: the bytes before the update changed", i)
		}
		checkEncoded(t, fmt.Sprintf("set %d", i), b[len(prefix):], addUpdate(setLabels, eps))
	}
}

// TestAppendRemoveUpdate checks appendRemoveUpdate against removeUpdate on generated
// addresses (IPv4, IPv6, IPv4-mapped, port 0).
func TestAppendRemoveUpdate(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for i := range 1000 {
		addrs := make([]netip.AddrPort, r.IntN(20))
		if i%100 == 0 {
			addrs = make([]netip.AddrPort, 300)
		}
		for j := range addrs {
			addrs[j] = genAddr(r)
		}
		checkEncoded(t, fmt.Sprintf("remove %d", i), appendRemoveUpdate(nil, addrs), removeUpdate(addrs))
	}
}

func TestAppendNoEndpointsUpdate(t *testing.T) {
	for _, exists := range []bool{false, true} {
		checkEncoded(t, fmt.Sprintf("exists %v", exists), appendNoEndpointsUpdate(nil, exists), noEndpointsUpdate(exists))
	}
}

// TestUpdateBatch checks that a batch's updates keep their bytes when a later one grows the
// buffer, that updates built as messages get their kinds, and that a released batch is empty.
func TestUpdateBatch(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	eps := make([]*snapshot.Endpoint, 200)
	for i := range eps {
		eps[i] = genEndpoint(r)
	}
	addrs := []netip.AddrPort{genAddr(r), genAddr(r)}
	u := newUpdateBatch()
	u.remove(addrs)
	u.add(nil, eps[:1])
	u.add(eps[0].Labels, eps) // grows the buffer
	u.noEndpoints(true)
	built := []*pb.Update{removeUpdate(addrs), addUpdate(eps[0].Labels, eps), noEndpointsUpdate(false)}
	if err := u.messages(built); err != nil {
		t.Fatal(err)
	}
	want := append([]*pb.Update{removeUpdate(addrs), addUpdate(nil, eps[:1]), addUpdate(eps[0].Labels, eps), noEndpointsUpdate(true)}, built...)
	var i int
	err := u.send(func(b []byte, kind wire.UpdateKind) error {
		if kind != updateKind(want[i]) {
			t.Fatalf("update %d: kind %d, want %d", i, kind, updateKind(want[i]))
		}
		checkEncoded(t, fmt.Sprintf("update %d", i), b, want[i])
		i++
		return nil
	})
	if err != nil || i != len(want) {
		t.Fatalf("sent %d of %d updates: %v", i, len(want), err)
	}
	stop := fmt.Errorf("stop")
	if n := 0; u.send(func([]byte, wire.UpdateKind) error { n++; return stop }) != stop || n != 1 {
		t.Fatalf("send went on after an error (%d sends)", n)
	}
	u.release()
	u = newUpdateBatch()
	defer u.release()
	if len(u.ups) != 0 || len(u.buf) != 0 {
		t.Fatalf("a new batch holds %d updates, %d bytes", len(u.ups), len(u.buf))
	}
}

// BenchmarkEncodeAdd measures encoding a stream's first update for a service of 100 meshed
// endpoints with the usual pod labels: old, building the messages (addUpdate) and marshalling
// them; new, appendAddUpdate into a reused buffer.
func BenchmarkEncodeAdd(b *testing.B) {
	setLabels := []snapshot.Label{{Key: "namespace", Value: "bench"}, {Key: "service", Value: "web"}}
	eps := make([]*snapshot.Endpoint, benchWidth)
	for i := range eps {
		eps[i] = &snapshot.Endpoint{
			Addr:                netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 1, byte(i / 250), byte(i%250 + 1)}), 8080),
			Weight:              10000,
			OpaqueTransportPort: 4143,
			Hint:                snapshot.HintH2,
			HTTP2:               true,
			ID:                  unique.Make("web.bench.serviceaccount.identity.linkerd.cluster.local"),
			Pod:                 fmt.Sprintf("web-5d8f7c9b6d-%05d", i), // its pod label
			Labels: []snapshot.Label{
				{Key: "control_plane_ns", Value: "linkerd"},
				{Key: "deployment", Value: "web"},
				{Key: "pod_template_hash", Value: "5d8f7c9b6d"},
				{Key: "serviceaccount", Value: "web"},
			},
		}
	}
	b.Run("old", func(b *testing.B) {
		b.ReportAllocs()
		var n int
		for b.Loop() {
			enc, err := proto.Marshal(addUpdate(setLabels, eps))
			if err != nil {
				b.Fatal(err)
			}
			n = len(enc)
		}
		b.SetBytes(int64(n))
	})
	b.Run("new", func(b *testing.B) {
		b.ReportAllocs()
		var buf []byte
		for b.Loop() {
			buf = appendAddUpdate(buf[:0], setLabels, eps)
		}
		b.SetBytes(int64(len(buf)))
	})
}

// TestServerCodecCopiesEncoded checks that the server codec writes an encoded update as it
// is, small or large enough for a buffer of its own, and that it copies it: a batch reuses
// its buffer once the update is sent.
func TestServerCodecCopiesEncoded(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, n := range []int{1, 200} {
		eps := make([]*snapshot.Endpoint, n)
		for i := range eps {
			eps[i] = genEndpoint(r)
		}
		b := appendAddUpdate(nil, nil, eps)
		if n > 100 && len(b) <= ownBufferAbove {
			t.Fatalf("%d endpoints encode in %d bytes: not above %d", n, len(b), ownBufferAbove)
		}
		want := bytes.Clone(b)
		got, err := serverCodec{}.Marshal(encodedMessage(b))
		if err != nil {
			t.Fatal(err)
		}
		clear(b)
		if !bytes.Equal(got.Materialize(), want) {
			t.Fatalf("%d endpoints: the codec did not write the encoded update as it was", n)
		}
		got.Free()
	}
}

// FuzzAppendAddUpdate checks appendAddUpdate against addUpdate on sets generated from the
// fuzzer's seeds.
func FuzzAppendAddUpdate(f *testing.F) {
	f.Add(uint64(1), uint64(2), uint8(3))
	f.Add(uint64(0), uint64(0), uint8(0))
	f.Add(uint64(42), uint64(7), uint8(200))
	f.Fuzz(func(t *testing.T, s1, s2 uint64, n uint8) {
		r := rand.New(rand.NewPCG(s1, s2))
		eps := make([]*snapshot.Endpoint, n)
		for i := range eps {
			eps[i] = genEndpoint(r)
		}
		setLabels := genLabels(r, "set")
		checkEncoded(t, "fuzzed set", appendAddUpdate(nil, setLabels, eps), addUpdate(setLabels, eps))
	})
}
