package wire_test

import (
	"errors"
	"net/netip"
	"testing"

	pb "github.com/linkerd/linkerd2-proxy-api/go/destination"
	pbnet "github.com/linkerd/linkerd2-proxy-api/go/net"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/meridian-mesh/meridian/internal/wire"
)

func weighted(ap string, labels map[string]string) *pb.WeightedAddr {
	return &pb.WeightedAddr{Addr: wire.TCPAddr(netip.MustParseAddrPort(ap)), Weight: 10000, MetricLabels: labels,
		TlsIdentity: &pb.TlsIdentity{Strategy: &pb.TlsIdentity_DnsLikeIdentity_{DnsLikeIdentity: &pb.TlsIdentity_DnsLikeIdentity{Name: "web.ns.serviceaccount.identity.linkerd.cluster.local"}}}}
}

var scanCases = map[string]*pb.Update{
	"add": {Update: &pb.Update_Add{Add: &pb.WeightedAddrSet{
		Addrs:        []*pb.WeightedAddr{weighted("10.0.0.1:80", map[string]string{"pod": "web-1", "zone": "a"}), weighted("[fd00::1]:8080", nil), weighted("[::ffff:10.0.0.2]:80", nil), weighted("0.0.0.0:0", nil)},
		MetricLabels: map[string]string{"service": "web", "namespace": "ns"}}}},
	"remove":         {Update: &pb.Update_Remove{Remove: &pb.AddrSet{Addrs: []*pbnet.TcpAddress{wire.TCPAddr(netip.MustParseAddrPort("10.0.0.1:80")), wire.TCPAddr(netip.MustParseAddrPort("[::]:1"))}}}},
	"no endpoints":   {Update: &pb.Update_NoEndpoints{NoEndpoints: &pb.NoEndpoints{Exists: true}}},
	"no endpoints 0": {Update: &pb.Update_NoEndpoints{NoEndpoints: &pb.NoEndpoints{}}},
	"empty add":      {Update: &pb.Update_Add{Add: &pb.WeightedAddrSet{}}},
	"nothing":        {},
}

// decoded is what a decoder makes of u: its kind, existence and each address with the
// fingerprint of its re-encoded WeightedAddr.
func decoded(t *testing.T, u *pb.Update) (wire.UpdateKind, bool, []wire.AddrKey, []uint64) {
	t.Helper()
	var keys []wire.AddrKey
	var fps []uint64
	key := func(a *pbnet.TcpAddress) {
		ap, err := wire.ToAddrPort(a)
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, wire.KeyOf(ap))
	}
	switch x := u.GetUpdate().(type) {
	case *pb.Update_Add:
		for _, a := range x.Add.GetAddrs() {
			key(a.GetAddr())
			b, err := proto.MarshalOptions{Deterministic: true}.Marshal(a)
			if err != nil {
				t.Fatal(err)
			}
			fps = append(fps, wire.Fingerprint(b))
		}
		return wire.UpdateAdd, false, keys, fps
	case *pb.Update_Remove:
		for _, a := range x.Remove.GetAddrs() {
			key(a)
			fps = append(fps, 0)
		}
		return wire.UpdateRemove, false, keys, fps
	case *pb.Update_NoEndpoints:
		return wire.UpdateNoEndpoints, x.NoEndpoints.GetExists(), nil, nil
	}
	return wire.UpdateNone, false, nil, nil
}

// TestScanUpdateAgreesWithDecoding scans the encodings of updates and compares with what a
// decoder reads; fingerprints do not depend on the order of metric labels.
func TestScanUpdateAgreesWithDecoding(t *testing.T) {
	for name, u := range scanCases {
		t.Run(name, func(t *testing.T) {
			for range 5 { // map order varies between encodings
				b, err := proto.Marshal(u)
				if err != nil {
					t.Fatal(err)
				}
				var keys []wire.AddrKey
				var fps []uint64
				kind, exists, err := wire.ScanUpdate(b, func(k wire.AddrKey, wa []byte) error {
					keys = append(keys, k)
					if wa == nil {
						fps = append(fps, 0)
					} else {
						fps = append(fps, wire.Fingerprint(wa))
					}
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
				wk, we, wkeys, wfps := decoded(t, u)
				if kind != wk || exists != we || len(keys) != len(wkeys) {
					t.Fatalf("scan: kind %d exists %v %d addresses; decoded: %d %v %d", kind, exists, len(keys), wk, we, len(wkeys))
				}
				for i := range keys {
					if keys[i] != wkeys[i] || fps[i] != wfps[i] {
						t.Fatalf("address %d: scan %v/%x, decoded %v/%x", i, keys[i].AddrPort(), fps[i], wkeys[i].AddrPort(), wfps[i])
					}
				}
			}
		})
	}
}

func TestFingerprintTellsChanges(t *testing.T) {
	fp := func(a *pb.WeightedAddr) uint64 {
		b, _ := proto.Marshal(a)
		return wire.Fingerprint(b)
	}
	base := fp(weighted("10.0.0.1:80", map[string]string{"pod": "a"}))
	for name, a := range map[string]*pb.WeightedAddr{
		"label value": weighted("10.0.0.1:80", map[string]string{"pod": "b"}),
		"no labels":   weighted("10.0.0.1:80", nil),
		"port":        weighted("10.0.0.1:81", map[string]string{"pod": "a"}),
	} {
		if fp(a) == base {
			t.Errorf("%s: same fingerprint", name)
		}
	}
}

// TestScanUpdateRefuses checks that malformed updates are errors and that encodings a
// decoder would merge are ErrNonCanonical. ScanUpdate reads in one pass, so each may have
// seen some addresses of a refused update: its callers (destclient.Held.ApplyRaw, the bench
// harness's addrView) collect them and apply nothing on an error, which their tests check.
func TestScanUpdateRefuses(t *testing.T) {
	add, _ := proto.Marshal(scanCases["add"])
	rm, _ := proto.Marshal(scanCases["remove"])
	noIP, _ := proto.Marshal(&pb.Update{Update: &pb.Update_Remove{Remove: &pb.AddrSet{Addrs: []*pbnet.TcpAddress{{Port: 80}}}}})
	bigPort, _ := proto.Marshal(&pb.Update{Update: &pb.Update_Remove{Remove: &pb.AddrSet{Addrs: []*pbnet.TcpAddress{{Ip: wire.IP(netip.MustParseAddr("10.0.0.1")), Port: 70000}}}}})
	noAddr, _ := proto.Marshal(&pb.Update{Update: &pb.Update_Add{Add: &pb.WeightedAddrSet{Addrs: []*pb.WeightedAddr{{Weight: 1}}}}})
	for name, tc := range map[string]struct {
		b            []byte
		nonCanonical bool
	}{
		"truncated":   {b: add[:len(add)-3]},
		"no ip":       {b: noIP},
		"port":        {b: bigPort},
		"no address":  {b: noAddr},
		"two kinds":   {b: append(append([]byte{}, add...), rm...), nonCanonical: true},
		"wrong type":  {b: protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), 1)},
		"group":       {b: protowire.AppendTag(nil, 9, protowire.StartGroupType)},
		"bad tag":     {b: []byte{0x80}},
		"two removes": {b: append(append([]byte{}, rm...), rm...), nonCanonical: true},
	} {
		_, _, err := wire.ScanUpdate(tc.b, func(wire.AddrKey, []byte) error { return nil })
		if err == nil {
			t.Errorf("%s: no error", name)
		}
		if errors.Is(err, wire.ErrNonCanonical) != tc.nonCanonical {
			t.Errorf("%s: %v, want non-canonical %v", name, err, tc.nonCanonical)
		}
	}
}

// FuzzScanUpdate checks that ScanUpdate never panics and that, whenever it accepts bytes a
// decoder also accepts, both read the same addresses.
func FuzzScanUpdate(f *testing.F) {
	for _, u := range scanCases {
		b, _ := proto.Marshal(u)
		f.Add(b)
	}
	f.Add([]byte{0x0a, 0x02, 0x0a, 0x00})
	f.Fuzz(func(t *testing.T, b []byte) {
		var keys []wire.AddrKey
		kind, exists, err := wire.ScanUpdate(b, func(k wire.AddrKey, _ []byte) error { keys = append(keys, k); return nil })
		if err != nil {
			return
		}
		var u pb.Update
		if proto.Unmarshal(b, &u) != nil {
			return // the scanner reads less than a decoder checks (strings' UTF-8, say)
		}
		wk, we, wkeys, _ := decoded(t, &u)
		if kind != wk || exists != we || len(keys) != len(wkeys) {
			t.Fatalf("scan: kind %d exists %v %d addresses; decoded: %d %v %d", kind, exists, len(keys), wk, we, len(wkeys))
		}
		for i := range keys {
			if keys[i] != wkeys[i] {
				t.Fatalf("address %d: scan %v, decoded %v", i, keys[i].AddrPort(), wkeys[i].AddrPort())
			}
		}
	})
}

// TestCheckFraming checks what a relay takes for a protobuf message (an owner's profile,
// passed on undecoded) and what it refuses.
func TestCheckFraming(t *testing.T) {
	profile, err := proto.Marshal(&pb.DestinationProfile{FullyQualifiedName: "web.shop.svc.cluster.local", OpaqueProtocol: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		b    []byte
		ok   bool
	}{
		{"a profile", profile, true},
		{"empty", nil, true},
		{"cut short", profile[:len(profile)-1], false},
		{"a length past the end", []byte{0x0a, 0x05, 'a'}, false},
		{"a varint that does not end", []byte{0x08, 0xff, 0xff}, false},
		{"an unknown wire type", []byte{0x0f}, false},
		{"a tag without a value", []byte{0x08}, false},
		{"a group", []byte{0x0b, 0x0c}, false},
	} {
		if err := wire.CheckFraming(c.b); (err == nil) != c.ok {
			t.Errorf("%s (% x): CheckFraming = %v, want ok %v", c.name, c.b, err, c.ok)
		}
	}
}

// benchAdd is the encoding of an Add of n addresses: bare (an address and a weight, what a
// replica sends for endpoints without Pods) or meshed (with the metric labels, identity and
// protocol hint of a meshed Pod's endpoint).
func benchAdd(b *testing.B, n int, meshed bool) []byte {
	b.Helper()
	set := &pb.WeightedAddrSet{MetricLabels: map[string]string{"namespace": "shop", "service": "web"}}
	for i := range n {
		ap := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)}), 8080)
		if !meshed {
			set.Addrs = append(set.Addrs, &pb.WeightedAddr{Addr: wire.TCPAddr(ap), Weight: 10000})
			continue
		}
		a := weighted(ap.String(), map[string]string{"pod": "web-7d9c8b6f5-abcde", "pod_template_hash": "7d9c8b6f5",
			"serviceaccount": "web", "deployment": "web", "zone": "zone-a"})
		a.ProtocolHint = &pb.ProtocolHint{Protocol: &pb.ProtocolHint_H2_{H2: &pb.ProtocolHint_H2{}}}
		set.Addrs = append(set.Addrs, a)
	}
	enc, err := proto.Marshal(&pb.Update{Update: &pb.Update_Add{Add: set}})
	if err != nil {
		b.Fatal(err)
	}
	return enc
}

// BenchmarkScanUpdate scans a 100-address Add, as a relaying replica and the bench harness
// read every update they receive.
func BenchmarkScanUpdate(b *testing.B) {
	for _, meshed := range []bool{false, true} {
		name := "bare"
		if meshed {
			name = "meshed"
		}
		b.Run(name, func(b *testing.B) {
			enc := benchAdd(b, 100, meshed)
			n := 0
			b.SetBytes(int64(len(enc)))
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := wire.ScanUpdate(enc, func(wire.AddrKey, []byte) error { n++; return nil }); err != nil {
					b.Fatal(err)
				}
			}
			if n == 0 {
				b.Fatal("no address scanned")
			}
		})
	}
}
