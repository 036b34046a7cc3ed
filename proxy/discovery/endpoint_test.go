package discovery

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	pb "github.com/linkerd/linkerd2-proxy-api/go/destination"
	pbnet "github.com/linkerd/linkerd2-proxy-api/go/net"
	"google.golang.org/protobuf/proto"

	"github.com/meridian-mesh/meridian/internal/wire"
)

func wa(addr string, mutate ...func(*pb.WeightedAddr)) *pb.WeightedAddr {
	a := &pb.WeightedAddr{Addr: wire.TCPAddr(netip.MustParseAddrPort(addr)), Weight: 10000}
	for _, m := range mutate {
		m(a)
	}
	return a
}

func addU(labels map[string]string, as ...*pb.WeightedAddr) *pb.Update {
	return &pb.Update{Update: &pb.Update_Add{Add: &pb.WeightedAddrSet{Addrs: as, MetricLabels: labels}}}
}

func removeU(addrs ...string) *pb.Update {
	var rm []*pbnet.TcpAddress
	for _, a := range addrs {
		rm = append(rm, wire.TCPAddr(netip.MustParseAddrPort(a)))
	}
	return &pb.Update{Update: &pb.Update_Remove{Remove: &pb.AddrSet{Addrs: rm}}}
}

func noEndpointsU(exists bool) *pb.Update {
	return &pb.Update{Update: &pb.Update_NoEndpoints{NoEndpoints: &pb.NoEndpoints{Exists: exists}}}
}

func identity(name string) func(*pb.WeightedAddr) {
	return func(a *pb.WeightedAddr) {
		a.TlsIdentity = &pb.TlsIdentity{Strategy: &pb.TlsIdentity_DnsLikeIdentity_{DnsLikeIdentity: &pb.TlsIdentity_DnsLikeIdentity{Name: name}}}
	}
}

func TestConvertEndpoint(t *testing.T) {
	set := map[string]string{"service": "web", "namespace": "shop"}
	tests := []struct {
		name string
		in   *pb.WeightedAddr
		want Endpoint
		err  string
	}{
		{name: "plain, weight 0 is the default", in: wa("10.0.0.1:8080", func(a *pb.WeightedAddr) { a.Weight = 0 }),
			want: Endpoint{Addr: netip.MustParseAddrPort("10.0.0.1:8080"), Weight: DefaultWeight, Labels: set}},
		{name: "meshed h2 with opaque transport and own labels",
			in: wa("[fd00::1]:8080", identity("web.shop.serviceaccount.identity.linkerd.cluster.local"), func(a *pb.WeightedAddr) {
				a.Weight = 7
				a.MetricLabels = map[string]string{"pod": "web-0", "service": "override"}
				a.ProtocolHint = &pb.ProtocolHint{Protocol: &pb.ProtocolHint_H2_{H2: &pb.ProtocolHint_H2{}},
					OpaqueTransport: &pb.ProtocolHint_OpaqueTransport{InboundPort: 4143}}
			}),
			want: Endpoint{Addr: netip.MustParseAddrPort("[fd00::1]:8080"), Weight: 7, Identity: "web.shop.serviceaccount.identity.linkerd.cluster.local",
				Hint: HintH2, OpaqueTransportPort: 4143, Labels: map[string]string{"service": "override", "namespace": "shop", "pod": "web-0"}}},
		{name: "opaque", in: wa("10.0.0.1:3306", func(a *pb.WeightedAddr) {
			a.ProtocolHint = &pb.ProtocolHint{Protocol: &pb.ProtocolHint_Opaque_{Opaque: &pb.ProtocolHint_Opaque{}}}
		}), want: Endpoint{Addr: netip.MustParseAddrPort("10.0.0.1:3306"), Weight: 10000, Hint: HintOpaque, Labels: set}},
		{name: "IPv4-mapped IPv6 is IPv4", in: wa("[::ffff:10.0.0.9]:80"),
			want: Endpoint{Addr: netip.MustParseAddrPort("10.0.0.9:80"), Weight: 10000, Labels: set}},
		{name: "no address", in: &pb.WeightedAddr{}, err: "endpoint address"},
		{name: "port 0", in: wa("10.0.0.1:0"), err: "port 0"},
		{name: "port out of range", in: &pb.WeightedAddr{Addr: &pbnet.TcpAddress{Ip: wire.IP(netip.MustParseAddr("10.0.0.1")), Port: 70000}}, err: "out of range"},
		{name: "opaque transport port out of range", in: wa("10.0.0.1:80", func(a *pb.WeightedAddr) {
			a.ProtocolHint = &pb.ProtocolHint{OpaqueTransport: &pb.ProtocolHint_OpaqueTransport{InboundPort: 65536}}
		}), err: "opaque transport port 65536"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := convertEndpoint(tt.in, set)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want one containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !equalEndpoint(got, tt.want) {
				t.Fatalf("got %+v\nwant %+v", got, tt.want)
			}
		})
	}
	// The set's labels are shared, never modified.
	if len(set) != 2 || set["service"] != "web" {
		t.Fatalf("set labels modified: %v", set)
	}
}

func TestConvertProfile(t *testing.T) {
	p, err := convertProfile(&pb.DestinationProfile{FullyQualifiedName: "web.shop.svc.cluster.local", OpaqueProtocol: true,
		Endpoint: wa("10.0.0.1:8080", identity("id"))})
	if err != nil || p.FullyQualifiedName != "web.shop.svc.cluster.local" || !p.Opaque || p.Endpoint == nil || p.Endpoint.Identity != "id" {
		t.Fatalf("profile %+v, %v", p, err)
	}
	if _, err := convertProfile(&pb.DestinationProfile{Endpoint: &pb.WeightedAddr{}}); err == nil {
		t.Fatal("a profile endpoint without an address must be an error")
	}
	if !equalProfile(p, p) || equalProfile(p, Profile{}) {
		t.Fatal("equalProfile")
	}
}

func setAddrs(s *endpointSet) []string {
	return addrs(&Snapshot{Endpoints: s.eps})
}

// The semantics of linkerd-compat.md: the first update of a stream is its full state, a
// Remove first is ignored, NoEndpoints empties the set (exists: false marks it absent).
func TestEndpointSetSemantics(t *testing.T) {
	type step struct {
		restart bool
		u       *pb.Update
		changed bool
		want    []string
		exists  bool
		err     string
	}
	steps := []step{
		{restart: true, u: removeU("10.0.0.1:80"), want: nil}, // ignored: nothing known yet
		{u: addU(nil, wa("10.0.0.2:80"), wa("10.0.0.1:80")), changed: true, want: []string{"10.0.0.1:80", "10.0.0.2:80"}, exists: true},
		{u: addU(nil, wa("10.0.0.3:80")), changed: true, want: []string{"10.0.0.1:80", "10.0.0.2:80", "10.0.0.3:80"}, exists: true},
		{u: addU(nil, wa("10.0.0.3:80")), want: []string{"10.0.0.1:80", "10.0.0.2:80", "10.0.0.3:80"}, exists: true}, // no change
		{u: removeU("10.0.0.1:80", "10.0.0.9:80"), changed: true, want: []string{"10.0.0.2:80", "10.0.0.3:80"}, exists: true},
		{u: removeU("10.0.0.9:80"), want: []string{"10.0.0.2:80", "10.0.0.3:80"}, exists: true}, // unknown: nothing removed
		// A new stream: its Remove first is ignored, its first Add replaces the set.
		{restart: true, u: removeU("10.0.0.2:80"), want: []string{"10.0.0.2:80", "10.0.0.3:80"}, exists: true},
		{u: addU(nil, wa("10.0.0.3:80"), wa("10.0.0.4:80")), changed: true, want: []string{"10.0.0.3:80", "10.0.0.4:80"}, exists: true},
		// The same full state again changes nothing.
		{restart: true, u: addU(nil, wa("10.0.0.4:80"), wa("10.0.0.3:80")), want: []string{"10.0.0.3:80", "10.0.0.4:80"}, exists: true},
		{u: noEndpointsU(true), changed: true, want: nil, exists: true},
		{u: noEndpointsU(false), changed: true, want: nil, exists: false},
		{u: addU(nil, wa("10.0.0.5:80"), wa("10.0.0.5:80", func(a *pb.WeightedAddr) { a.Weight = 3 })), changed: true, want: []string{"10.0.0.5:80"}, exists: true},
		// What cannot be used is skipped and said (linkerd2-proxy's resolver skips it): the
		// rest of the update applies.
		{u: addU(nil, wa("10.0.0.6:80"), &pb.WeightedAddr{}), changed: true, want: []string{"10.0.0.5:80", "10.0.0.6:80"}, exists: true, err: "endpoint address"},
		{u: &pb.Update{Update: &pb.Update_Remove{Remove: &pb.AddrSet{Addrs: []*pbnet.TcpAddress{{}, wire.TCPAddr(netip.MustParseAddrPort("10.0.0.6:80"))}}}},
			changed: true, want: []string{"10.0.0.5:80"}, exists: true, err: "remove"},
		{u: &pb.Update{}, want: []string{"10.0.0.5:80"}, exists: true, err: "unknown kind"},
	}
	var s endpointSet
	for i, st := range steps {
		if st.restart {
			s.restart()
		}
		changed, err := s.apply(st.u)
		if st.err == "" && err != nil || st.err != "" && (err == nil || !strings.Contains(err.Error(), st.err)) {
			t.Fatalf("step %d: error %v, want %q", i, err, st.err)
		}
		if changed != st.changed || !slices.Equal(setAddrs(&s), st.want) || (s.resolved && s.exists != st.exists) {
			t.Fatalf("step %d: changed %v (want %v), endpoints %v (want %v), exists %v (want %v)",
				i, changed, st.changed, setAddrs(&s), st.want, s.exists, st.exists)
		}
	}
	if s.eps[0].Weight != 3 {
		t.Fatalf("of an address listed twice the last must win: %+v", s.eps[0])
	}
	if !s.notFound() || s.exists || len(s.eps) != 0 || s.notFound() {
		t.Fatal("notFound: absent and empty, once")
	}
}

// A published slice is never modified by later updates.
func TestEndpointSetSharesNothingMutable(t *testing.T) {
	var s endpointSet
	s.restart()
	if _, err := s.apply(addU(nil, wa("10.0.0.1:80"), wa("10.0.0.2:80"))); err != nil {
		t.Fatal(err)
	}
	held := s.eps
	before := slices.Clone(held)
	for _, u := range []*pb.Update{addU(nil, wa("10.0.0.1:80", identity("x"))), removeU("10.0.0.2:80"), addU(nil, wa("10.0.0.0:80"))} {
		if _, err := s.apply(u); err != nil {
			t.Fatal(err)
		}
	}
	if !slices.EqualFunc(held, before, equalEndpoint) {
		t.Fatalf("a published slice changed: %v", addrs(&Snapshot{Endpoints: held}))
	}
}

func TestServiceOf(t *testing.T) {
	for host, want := range map[string]string{
		"web.shop.svc.cluster.local":       "shop/web",
		"web-0.web.shop.svc.cluster.local": "shop/web",
		"a.b.web.shop.svc.cluster.local":   "",
		"shop.svc.cluster.local":           "",
		"web.shop.svc.other.local":         "",
		"web.shop.svc.cluster.localx":      "",
		"10.0.0.1":                         "",
		".shop.svc.cluster.local":          "",
	} {
		if got := serviceOf(host, "cluster.local"); got != want {
			t.Errorf("serviceOf(%q) = %q, want %q", host, got, want)
		}
	}
}

func FuzzParseTarget(f *testing.F) {
	for _, s := range []string{"web.shop.svc.cluster.local", "web.shop.svc.cluster.local:8080", "WEB.Shop.svc.cluster.local.:80",
		"web-0.web.shop.svc.cluster.local:80", "10.0.0.1:80", "[fd00::1]:443", "[fe80::1%eth0]:80", "a b", ":80", "x:0", "x:65536",
		strings.Repeat("a.", 130) + "svc.cluster.local"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		n, err := parseTarget(in, 80, "cluster.local")
		if err != nil {
			if n != (targetName{}) {
				t.Fatalf("error %v with a result %+v", err, n)
			}
			return
		}
		// The path is normal: parsing it again gives it back.
		again, err := parseTarget(n.path, 80, "cluster.local")
		if err != nil || again != n {
			t.Fatalf("%q -> %+v -> %+v %v", in, n, again, err)
		}
		if n.service != "" && (strings.Count(n.service, "/") != 1 || !strings.Contains(n.path, ".svc.cluster.local:")) {
			t.Fatalf("%q: service %q of path %q", in, n.service, n.path)
		}
		// An IP host is never a service, and its address is the path's (IPv4-mapped as IPv4).
		if n.ip.IsValid() {
			p := netip.MustParseAddrPort(n.path)
			if n.service != "" || netip.AddrPortFrom(p.Addr().Unmap(), p.Port()) != n.ip {
				t.Fatalf("%q: IP target %+v", in, n)
			}
		}
	})
}

// Any sequence of updates (decoded from bytes) leaves the set sorted and unique, an update
// of unknown kind changes nothing, and an address that is skipped is not in the set.
func FuzzEndpointSetApply(f *testing.F) {
	seeds := []*pb.Update{
		addU(map[string]string{"service": "web"}, wa("10.0.0.1:80"), wa("10.0.0.2:80", identity("x"))),
		removeU("10.0.0.1:80"), noEndpointsU(true), noEndpointsU(false), addU(nil, &pb.WeightedAddr{}),
	}
	for _, u := range seeds {
		b, _ := proto.Marshal(u)
		f.Add(b, b, true)
	}
	f.Fuzz(func(t *testing.T, first, second []byte, restart bool) {
		var s endpointSet
		s.restart()
		for _, b := range [][]byte{first, second, first} {
			var u pb.Update
			if proto.Unmarshal(b, &u) != nil {
				return
			}
			before := s
			changed, err := s.apply(&u)
			if err == errUnknownUpdate && (changed || !slices.EqualFunc(before.eps, s.eps, equalEndpoint) || before.exists != s.exists) {
				t.Fatalf("an update of unknown kind changed the set")
			}
			for _, e := range s.eps {
				if !e.Addr.IsValid() {
					t.Fatalf("an address that did not convert is in the set: %+v", e)
				}
			}
			if !slices.IsSortedFunc(s.eps, compareAddr) || len(slices.CompactFunc(slices.Clone(s.eps), func(a, b Endpoint) bool { return a.Addr == b.Addr })) != len(s.eps) {
				t.Fatalf("set not sorted and unique: %v", setAddrs(&s))
			}
			if restart {
				s.restart()
			}
		}
	})
}

// endpoints100 returns an Add of 100 meshed endpoints with labels, as Meridian sends them.
func endpoints100(weight uint32) *pb.Update {
	as := make([]*pb.WeightedAddr, 100)
	for i := range as {
		as[i] = wa(fmt.Sprintf("10.0.%d.%d:8080", i/250, i%250+1), identity("web.shop.serviceaccount.identity.linkerd.cluster.local"), func(a *pb.WeightedAddr) {
			a.Weight = weight
			a.MetricLabels = map[string]string{"pod": fmt.Sprintf("web-%d", i), "serviceaccount": "web", "deployment": "web"}
			a.ProtocolHint = &pb.ProtocolHint{Protocol: &pb.ProtocolHint_H2_{H2: &pb.ProtocolHint_H2{}}}
		})
	}
	return addU(map[string]string{"service": "web", "namespace": "shop"}, as...)
}

func benchTarget() *target {
	return newTarget(NewResolver(DefaultConfig(), nil, nil), context.Background(), targetName{path: "web.shop.svc.cluster.local:80", service: "shop/web"})
}

// The cost of applying a stream's Add of 100 endpoints and publishing the snapshot (each
// iteration a new stream whose full state differs from the last).
func BenchmarkApplyAdd100(b *testing.B) {
	t := benchTarget()
	g := getSession{t}
	adds := []*pb.Update{endpoints100(1), endpoints100(2)}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		g.restart()
		if err := g.message(adds[i%2]); err != nil {
			b.Fatal(err)
		}
	}
}

// The cost of an Add of one endpoint to a set of 100 (a delta).
func BenchmarkApplyDelta(b *testing.B) {
	t := benchTarget()
	g := getSession{t}
	g.restart()
	if err := g.message(endpoints100(1)); err != nil {
		b.Fatal(err)
	}
	one := []*pb.Update{addU(nil, wa("10.0.9.1:8080")), removeU("10.0.9.1:8080")}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if err := g.message(one[i%2]); err != nil {
			b.Fatal(err)
		}
	}
}

// Snapshot and Changed reads, from many goroutines, as balancers do per request.
func BenchmarkSnapshot(b *testing.B) {
	t := benchTarget()
	g := getSession{t}
	g.restart()
	if err := g.message(endpoints100(1)); err != nil {
		b.Fatal(err)
	}
	h := &Target{t: t}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		n := 0
		for pb.Next() {
			_ = h.Changed()
			n += len(h.Snapshot().Endpoints)
		}
		sink.Add(int64(n))
	})
}

var sink atomic.Int64

// TestTLSIdentityNeverDroppedToPlaintext: an endpoint whose TLS identity is not DNS-like (a
// SPIFFE URI, as Linkerd's destination sends for an ExternalWorkload) or is empty still
// requires TLS: the proxy, which verifies DNS-like identities only, names it so that no
// certificate verifies it. It used to have no identity, and was reached in plaintext.
func TestTLSIdentityNeverDroppedToPlaintext(t *testing.T) {
	for name, id := range map[string]*pb.TlsIdentity{
		"uri": {
			Strategy:   &pb.TlsIdentity_UriLikeIdentity_{UriLikeIdentity: &pb.TlsIdentity_UriLikeIdentity{Uri: "spiffe://root.linkerd.cluster.local/ew-1"}},
			ServerName: &pb.TlsIdentity_DnsLikeIdentity{Name: "ew-1.server.local"},
		},
		"empty": {},
	} {
		var s endpointSet
		s.restart()
		if _, err := s.apply(addU(nil, wa("10.0.0.7:8080", func(a *pb.WeightedAddr) { a.TlsIdentity = id }))); err != nil {
			t.Fatalf("%s: refused: %v", name, err)
		}
		if got := s.eps[0].Identity; got == "" || !strings.Contains(got, ":") && got != unverifiableIdentity {
			t.Errorf("%s identity: endpoint identity %q, want one no certificate verifies", name, got)
		}
	}
}
