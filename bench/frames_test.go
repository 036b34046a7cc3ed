package bench

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"
	"time"

	pb "github.com/linkerd/linkerd2-proxy-api/go/destination"
	pbnet "github.com/linkerd/linkerd2-proxy-api/go/net"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/meridian-mesh/meridian/bench/gen"
	"github.com/meridian-mesh/meridian/internal/destclient"
	"github.com/meridian-mesh/meridian/internal/testutil"
	"github.com/meridian-mesh/meridian/internal/wire"
)

// genAddrs is the address pool of the generated updates: IPv4, IPv6 and IPv4-mapped IPv6
// (which a decoder keeps as IPv6), on a few ports.
func genAddrs() []netip.AddrPort {
	var out []netip.AddrPort
	for i := range 12 {
		port := uint16(80 + i%3)
		out = append(out,
			netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 1, byte(i / 4), byte(i)}), port),
			netip.AddrPortFrom(netip.MustParseAddr(fmt.Sprintf("fd00::%x", i+1)), port),
			netip.AddrPortFrom(netip.MustParseAddr(fmt.Sprintf("::ffff:10.2.0.%d", i)), port))
	}
	return out
}

// genWeighted returns a WeightedAddr with what a replica sends along: labels, an identity, a
// protocol hint, an authority override, HTTP/2 parameters.
func genWeighted(rng *rand.Rand, ap netip.AddrPort) *pb.WeightedAddr {
	a := &pb.WeightedAddr{Addr: wire.TCPAddr(ap), Weight: rng.Uint32N(20000)}
	if rng.IntN(4) > 0 {
		a.MetricLabels = map[string]string{"pod": fmt.Sprintf("web-%d", rng.IntN(100)), "zone": "zone-a", "serviceaccount": "web"}
	}
	if rng.IntN(2) == 0 {
		a.TlsIdentity = &pb.TlsIdentity{Strategy: &pb.TlsIdentity_DnsLikeIdentity_{DnsLikeIdentity: &pb.TlsIdentity_DnsLikeIdentity{Name: "web.ns.serviceaccount.identity.linkerd.cluster.local"}}}
		a.ProtocolHint = &pb.ProtocolHint{Protocol: &pb.ProtocolHint_H2_{H2: &pb.ProtocolHint_H2{}}, OpaqueTransport: &pb.ProtocolHint_OpaqueTransport{InboundPort: 4143}}
	}
	if rng.IntN(4) == 0 {
		a.AuthorityOverride = &pb.AuthorityOverride{AuthorityOverride: "web.ns.svc.cluster.local:80"}
		a.Http2 = &pb.Http2ClientParams{}
	}
	return a
}

// genUpdate returns a random update over pool: mostly adds and removes (some of addresses
// not held), sometimes NoEndpoints, rarely an update of no kind.
func genUpdate(rng *rand.Rand, pool []netip.AddrPort) *pb.Update {
	pick := func() []netip.AddrPort {
		out := make([]netip.AddrPort, 1+rng.IntN(5))
		for i := range out {
			out[i] = pool[rng.IntN(len(pool))]
		}
		return out
	}
	switch r := rng.IntN(20); {
	case r < 10:
		set := &pb.WeightedAddrSet{MetricLabels: map[string]string{"service": "web", "namespace": "ns"}}
		for _, ap := range pick() {
			set.Addrs = append(set.Addrs, genWeighted(rng, ap))
		}
		return &pb.Update{Update: &pb.Update_Add{Add: set}}
	case r < 18:
		set := &pb.AddrSet{}
		for _, ap := range pick() {
			set.Addrs = append(set.Addrs, wire.TCPAddr(ap))
		}
		return &pb.Update{Update: &pb.Update_Remove{Remove: set}}
	case r < 19:
		return &pb.Update{Update: &pb.Update_NoEndpoints{NoEndpoints: &pb.NoEndpoints{Exists: rng.IntN(2) == 0}}}
	default:
		return &pb.Update{}
	}
}

// applyBoth applies b to a copy of v decoded (proto.Unmarshal and apply, as the harness did)
// and to another copy with applyEncoded, and fails t unless both agree: on whether it is an
// error and, if not, on the addresses seen and the view left. It returns the decoded result.
func applyBoth(t *testing.T, v addrView, b []byte) (addrView, error) {
	t.Helper()
	rec := func(seen *[]string) func(netip.AddrPort, bool) {
		return func(ap netip.AddrPort, added bool) { *seen = append(*seen, fmt.Sprint(ap, added)) }
	}
	var u pb.Update
	if err := proto.Unmarshal(b, &u); err != nil {
		t.Fatalf("test input does not decode: %v", err)
	}
	dec, enc := maps.Clone(v), maps.Clone(v)
	var seenDec, seenEnc []string
	errDec := dec.apply(&u, rec(&seenDec))
	errEnc := enc.applyEncoded(b, rec(&seenEnc))
	if (errDec == nil) != (errEnc == nil) {
		t.Fatalf("update %x: decoded: %v; scanned: %v", b[:min(len(b), 64)], errDec, errEnc)
	}
	if errDec != nil {
		return dec, errDec
	}
	if !slices.Equal(seenDec, seenEnc) || !maps.Equal(dec, enc) {
		t.Fatalf("update %x: decoded saw %q and holds %d addresses; scanned saw %q and holds %d", b[:min(len(b), 64)], seenDec, len(dec), seenEnc, len(enc))
	}
	return dec, nil
}

// TestApplyEncodedAgreesWithDecoding runs generated streams of updates through both ways of
// applying them.
func TestApplyEncodedAgreesWithDecoding(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	pool := genAddrs()
	v := addrView{}
	var errs, adds int
	for range 3000 {
		u := genUpdate(rng, pool)
		b, err := proto.Marshal(u)
		if err != nil {
			t.Fatal(err)
		}
		next, err := applyBoth(t, v, b)
		if err != nil {
			errs++
			next = addrView{} // the stream would reopen
		}
		if u.GetAdd() != nil {
			adds++
		}
		v = next
	}
	if errs == 0 || errs > 1500 || adds == 0 {
		t.Fatalf("%d errors, %d adds in 3000 updates: the generator tests too little", errs, adds)
	}
}

// scanSeeds are the fuzz seeds: generated updates, and encodings the scanner refuses but a
// decoder accepts (a field of a known number but another wire type is an unknown field to
// it; a oneof given twice is merged; a port over 32 bits is truncated).
func scanSeeds() [][]byte {
	rng := rand.New(rand.NewPCG(3, 4))
	pool := genAddrs()
	var out [][]byte
	for range 20 {
		b, _ := proto.Marshal(genUpdate(rng, pool))
		out = append(out, b)
	}
	add, _ := proto.Marshal(&pb.Update{Update: &pb.Update_Add{Add: &pb.WeightedAddrSet{Addrs: []*pb.WeightedAddr{genWeighted(rng, pool[0])}}}})
	rm, _ := proto.Marshal(&pb.Update{Update: &pb.Update_Remove{Remove: &pb.AddrSet{Addrs: []*pbnet.TcpAddress{wire.TCPAddr(pool[0])}}}})
	// TcpAddress{ip: 10.0.0.1 (a fixed32: little-endian), port as a fixed32 (to a decoder an
	// unknown field: port 0)}, in an AddrSet, in an Update.remove.
	tcp := []byte{0x0a, 0x05, 0x0d, 1, 0, 0, 10, 0x15, 80, 0, 0, 0}
	wrongPort := append([]byte{0x12, byte(len(tcp) + 2), 0x0a, byte(len(tcp))}, tcp...)
	// TcpAddress{ip: 10.0.0.1, port: 1<<32 + 80}.
	bigPort := []byte{0x12, 0x0f, 0x0a, 0x0d, 0x0a, 0x05, 0x0d, 1, 0, 0, 10, 0x10, 0xd0, 0x80, 0x80, 0x80, 0x10}
	return append(out, append(slices.Clone(add), add...), append(slices.Clone(add), rm...), wrongPort, bigPort,
		[]byte{0x1a, 0x00}, []byte{0x08, 0x01}, nil)
}

// FuzzScanGetUpdate checks that applyEncoded never panics and that, on every input a decoder
// accepts, it does what decoding and apply do, on a view holding part of the seeds'
// addresses.
func FuzzScanGetUpdate(f *testing.F) {
	for _, b := range scanSeeds() {
		f.Add(b)
	}
	held := heldView()
	f.Fuzz(func(t *testing.T, b []byte) {
		if proto.Unmarshal(b, &pb.Update{}) != nil {
			v := maps.Clone(held)
			_ = v.applyEncoded(b, func(netip.AddrPort, bool) {})
			return // the scanner checks less than a decoder (strings' UTF-8, say)
		}
		_, _ = applyBoth(t, held, b)
	})
}

// heldView holds every other address of genAddrs, and the hand-encoded seeds' addresses.
func heldView() addrView {
	v := addrView{wire.KeyOf(netip.MustParseAddrPort("10.0.0.1:80")): {}, wire.KeyOf(netip.MustParseAddrPort("10.0.0.1:0")): {}}
	for i, ap := range genAddrs() {
		if i%2 == 0 {
			v[wire.KeyOf(ap)] = struct{}{}
		}
	}
	return v
}

// TestScanSeedsAgree applies the seeds both ways; those the scanner refuses but a decoder
// accepts are applied without error.
func TestScanSeedsAgree(t *testing.T) {
	fallback := 0
	for _, b := range scanSeeds() {
		_, err := applyBoth(t, heldView(), b)
		_, _, serr := wire.ScanUpdate(b, nil)
		if serr != nil && err == nil {
			fallback++
		}
	}
	if fallback < 4 {
		t.Fatalf("%d seeds are refused by the scanner and applied decoded, want 4", fallback)
	}
}

// TestFrameCodecKeepsBuffer: a frame's bytes outlive the buffers gRPC frees when Unmarshal
// returns, whether the message came in one buffer or several.
func TestFrameCodecKeepsBuffer(t *testing.T) {
	pool := mem.DefaultBufferPool()
	for _, parts := range [][]string{{"hello, world"}, {"hello, ", "world"}} {
		var data mem.BufferSlice
		for _, p := range parts {
			data = append(data, mem.Copy([]byte(p), pool))
		}
		var f frame
		if err := (frameCodec{}).Unmarshal(data, &f); err != nil {
			t.Fatal(err)
		}
		data.Free()
		if got := string(f.bytes()); got != "hello, world" {
			t.Errorf("%d buffers: frame holds %q", len(parts), got)
		}
		f.free()
	}
	if err := (frameCodec{}).Unmarshal(nil, new(pb.Update)); err == nil {
		t.Error("decode into an Update: no error")
	}
}

// destServer sends each Get the updates it is given, then refuses it with a redirect; each
// GetProfile gets two profiles, then the stream ends.
type destServer struct {
	pb.UnimplementedDestinationServer
	updates []*pb.Update
}

func (d *destServer) Get(_ *pb.GetDestination, s grpc.ServerStreamingServer[pb.Update]) error {
	for _, u := range d.updates {
		if err := s.Send(u); err != nil {
			return err
		}
	}
	s.SetTrailer(metadata.Pairs(destclient.OwnerTrailer, "127.0.0.1:9"))
	return status.Error(codes.FailedPrecondition, "not the owner")
}

func (d *destServer) GetProfile(_ *pb.GetDestination, s grpc.ServerStreamingServer[pb.DestinationProfile]) error {
	for range 2 {
		if err := s.Send(&pb.DestinationProfile{FullyQualifiedName: "web.ns.svc.cluster.local"}); err != nil {
			return err
		}
	}
	return nil
}

// TestFollowRaw follows a Get and a GetProfile stream of a real gRPC server: the view, the
// counts (the messages' encoded length), the first message and the redirect's owner.
func TestFollowRaw(t *testing.T) {
	a, b := netip.MustParseAddrPort("10.0.0.1:80"), netip.MustParseAddrPort("[fd00::2]:80")
	rng := rand.New(rand.NewPCG(5, 6))
	d := &destServer{updates: []*pb.Update{
		{Update: &pb.Update_Add{Add: &pb.WeightedAddrSet{Addrs: []*pb.WeightedAddr{genWeighted(rng, a), genWeighted(rng, b)}}}},
		{Update: &pb.Update_Remove{Remove: &pb.AddrSet{Addrs: []*pbnet.TcpAddress{wire.TCPAddr(a)}}}},
	}}
	addr := testutil.ServeGRPC(t, func(s *grpc.Server) { pb.RegisterDestinationServer(s, d) })
	cc := testutil.DialGRPC(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l := newLoad(gen.Config{Services: 1, Namespaces: 1}, 1)

	st := &stream{firstBatch: make(chan struct{}), opened: time.Now()}
	owner, got, err := l.follow(ctx, st, cc)
	if owner != "127.0.0.1:9" || !got || status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("Get: owner %q, got %v, err %v; want the redirect after messages", owner, got, err)
	}
	select {
	case <-st.firstBatch:
	default:
		t.Fatal("Get: no first message")
	}
	if len(st.view) != 1 || !st.firstAt.After(st.opened) {
		t.Fatalf("view %d addresses, first message at %v (opened %v)", len(st.view), st.firstAt, st.opened)
	}
	if _, ok := st.view[wire.KeyOf(b)]; !ok {
		t.Fatalf("view lacks %s", b)
	}
	want := int64(proto.Size(d.updates[0]) + proto.Size(d.updates[1]))
	if l.updates.Load() != 2 || l.bytes.Load() != want || l.applyErrors.Load() != 0 {
		t.Fatalf("%d updates, %d bytes, %d apply errors; want 2, %d, 0", l.updates.Load(), l.bytes.Load(), l.applyErrors.Load(), want)
	}

	pst := &stream{profile: true, firstBatch: make(chan struct{}), opened: time.Now()}
	if owner, got, err := l.follow(ctx, pst, cc); owner != "" || !got || err != nil {
		t.Fatalf("GetProfile: owner %q, got %v, err %v; want the end of the stream after a message", owner, got, err)
	}
	select {
	case <-pst.firstBatch:
	default:
		t.Fatal("GetProfile: no first message")
	}
	if l.updates.Load() != 4 || pst.view != nil {
		t.Fatalf("%d messages after the profiles, want 4; profile view %v", l.updates.Load(), pst.view)
	}
}

// TestReopenedStreamSeesChangesOnce: a stream that reopens (its replica was killed, or it was
// redirected) gets the whole state again. A change it saw before is not seen a second time,
// and the changes made while it was away, removals included, are seen in that state.
func TestReopenedStreamSeesChangesOnce(t *testing.T) {
	cfg := gen.DefaultConfig()
	l := newLoad(cfg, 1)
	l.subsPerSvc[0] = 2 // st and another stream that stays behind
	addr := func(serial uint32) netip.AddrPort { return netip.AddrPortFrom(gen.SerialAddr(serial), gen.TargetPort) }
	add := func(serials ...uint32) []byte {
		set := &pb.WeightedAddrSet{}
		for _, s := range serials {
			set.Addrs = append(set.Addrs, &pb.WeightedAddr{Addr: wire.TCPAddr(addr(s)), Weight: 1})
		}
		b, err := proto.Marshal(&pb.Update{Update: &pb.Update_Add{Add: set}})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	st := &stream{svc: 0, measure: true}
	st.reopened() // its first opening
	now := time.Now()
	apply := func(b []byte) {
		t.Helper()
		now = now.Add(time.Millisecond)
		if err := l.applyGet(st, b, now); err != nil {
			t.Fatal(err)
		}
	}
	apply(add(1, 2))
	// D (serial 4) is added and seen.
	l.recordChange(gen.Change{Service: 0, Kind: gen.ScaleUp, New: 4}, now)
	apply(add(4))
	// The stream is away: 2 leaves the set and 3 joins it.
	st.reopened()
	l.recordChange(gen.Change{Service: 0, Kind: gen.NotReady, Old: 2, New: 2}, now)
	l.recordChange(gen.Change{Service: 0, Kind: gen.ScaleUp, New: 3}, now)
	apply(add(1, 3, 4))
	for _, c := range []struct {
		serial uint32
		what   string
	}{{4, "D, seen before"}, {2, "the removal while away"}, {3, "the addition while away"}} {
		p, ok := l.pending.Load(c.serial)
		if !ok || p.left.Load() != 1 {
			left := int32(-1)
			if ok {
				left = p.left.Load()
			}
			t.Errorf("%s: %d streams left to see it (-1: none pending), want 1: seen once by this stream", c.what, left)
		}
	}
	if n := l.latency.h.TotalCount(); n != 3 {
		t.Errorf("%d latency samples, want 3", n)
	}
	if got := slices.Collect(maps.Keys(st.view)); len(got) != 3 || st.prev != nil {
		t.Errorf("view %v (prev %v), want 3 addresses and no prev", got, st.prev)
	}
}

// TestUnseenChangeIsNotAwaited: a change no stream can see (a not-ready endpoint scaled
// down) is not awaited, so it is neither missed at the end nor does it keep its endpoint busy.
func TestUnseenChangeIsNotAwaited(t *testing.T) {
	l := newLoad(gen.DefaultConfig(), 1)
	l.subsPerSvc[0] = 1
	now := time.Now()
	l.recordChange(gen.Change{Service: 0, Kind: gen.ScaleDown, Old: 5, New: 5, Unseen: true}, now)
	if l.missed() != 0 || l.busy(5) {
		t.Fatalf("an unseen change: %d missed, busy %v; want it not awaited", l.missed(), l.busy(5))
	}
	l.recordChange(gen.Change{Service: 0, Kind: gen.ScaleDown, Old: 6, New: 6}, now)
	if l.missed() != 1 {
		t.Fatalf("a seen change: %d missed before a stream saw it, want 1", l.missed())
	}
}

// BenchmarkApplyEncoded applies a 100-address Add to an empty view: what the harness does
// for each Get stream's first update (a storm opens thousands at once).
func BenchmarkApplyEncoded(b *testing.B) {
	set := &pb.WeightedAddrSet{}
	for i := range 100 {
		ap := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)}), 8080)
		set.Addrs = append(set.Addrs, &pb.WeightedAddr{Addr: wire.TCPAddr(ap), Weight: 10000})
	}
	enc, err := proto.Marshal(&pb.Update{Update: &pb.Update_Add{Add: set}})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		v := addrView{}
		if err := v.applyEncoded(enc, nil); err != nil || len(v) != 100 {
			b.Fatalf("%v, %d addresses", err, len(v))
		}
	}
}
