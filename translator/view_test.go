package translator

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/meridian-mesh/meridian/internal/testutil"
	"github.com/meridian-mesh/meridian/snapshot"
)

// viewSet builds a base address set: each endpoint "addr pod node zone hints" (pod, node,
// zone "-" for none; hints comma-separated zones, "-" for none).
func viewSet(local bool, eps ...string) *snapshot.AddressSet {
	s := &snapshot.AddressSet{Exists: true, LocalTrafficPolicy: local}
	dash := func(v string) string {
		if v == "-" {
			return ""
		}
		return v
	}
	for _, d := range eps {
		f := strings.Fields(d)
		e := &snapshot.Endpoint{Addr: netip.MustParseAddrPort(f[0]), Weight: DefaultWeight}
		ns := ""
		if dash(f[1]) != "" {
			ns = "ns"
		}
		e.SetPod(dash(f[1]), ns, dash(f[2]))
		if z := dash(f[3]); z != "" {
			e.Labels = append(e.Labels, snapshot.Label{Key: LabelKeyZone, Value: z})
		}
		e.Labels = append(e.Labels, snapshot.Label{Key: LabelKeyZoneLocality, Value: ZoneUnknown})
		if h := dash(f[4]); h != "" {
			e.Rare = snapshot.NewRare("", strings.Split(h, ","), "")
		}
		s.Endpoints = append(s.Endpoints, e)
	}
	s.Endpoints = snapshot.SortEndpoints(s.Endpoints)
	return s
}

// viewOf renders a view: its addresses with their weight and zone_locality, sorted.
func viewOf(s *snapshot.AddressSet) string {
	var out []string
	for _, e := range s.Sorted() {
		r := e.Addr.String() + " " + e.Label(LabelKeyZoneLocality)
		if e.Weight != DefaultWeight {
			r += " heavy"
		}
		out = append(out, r)
	}
	return strings.Join(out, ", ")
}

// TestView follows linkerd2's filteredListenerGroup (watcher/filtered_listener_group.go) and
// the tests of it in watcher/endpoints_watcher_test.go and endpoint_translator_test.go, whose
// inputs the cases use.
func TestView(t *testing.T) {
	west := Client{Node: "node-1", Zone: "west-1a"}
	for _, tc := range []struct {
		name string
		cfg  func(*Config)
		set  *snapshot.AddressSet
		c    Client
		want string
		same bool // the view is the set itself
	}{
		{name: "no locality, no filtering: the set itself", c: Client{},
			set:  viewSet(false, "1.1.1.1:1 a node-1 west-1a -", "1.1.1.2:1 b node-2 west-1b -"),
			want: "1.1.1.1:1 unknown, 1.1.1.2:1 unknown", same: true},
		// TestEndpointTranslatorExperimentalZoneWeights
		{name: "zone_locality against the client's zone", c: Client{Node: "test-123", Zone: "west-1a"},
			set:  viewSet(false, "7.9.7.9:7979 - - west-1a -", "9.7.9.7:9797 - - west-1b -", "9.9.9.9:1 - - - -"),
			want: "7.9.7.9:7979 local, 9.7.9.7:9797 remote, 9.9.9.9:1 unknown"},
		{name: "zone weights", cfg: func(c *Config) { c.ExtEndpointZoneWeights = true }, c: Client{Node: "test-123", Zone: "west-1a"},
			set:  viewSet(false, "7.9.7.9:7979 - - west-1a -", "9.7.9.7:9797 - - west-1b -"),
			want: "7.9.7.9:7979 local heavy, 9.7.9.7:9797 remote"},
		// TestEndpointSliceTopologyAwareFilter
		{name: "hints for the client's zone", c: west,
			set:  viewSet(false, "1.1.1.1:1 - - - west-1a", "1.1.1.2:1 - - - west-1b"),
			want: "1.1.1.1:1 unknown"},
		{name: "hints for no endpoint of the client's zone: all", c: Client{Node: "n", Zone: "east-1a"},
			set:  viewSet(false, "1.1.1.1:1 - - - west-1a", "1.1.1.2:1 - - - west-1b"),
			want: "1.1.1.1:1 unknown, 1.1.1.2:1 unknown", same: true},
		{name: "an endpoint without hints: no filtering", c: west,
			set:  viewSet(false, "1.1.1.1:1 - - - west-1a", "1.1.1.2:1 - - - -"),
			want: "1.1.1.1:1 unknown, 1.1.1.2:1 unknown", same: true},
		// TestEndpointSliceLocalTrafficPolicyIgnoresRemovalOfUnfilteredEndpoint
		{name: "internalTrafficPolicy Local", c: west,
			set:  viewSet(true, "1.1.1.1:1 name1-1 node-1 - -", "1.1.1.2:1 name1-2 node-2 - -", "1.1.1.3:1 - node-1 - -"),
			want: "1.1.1.1:1 unknown"},
		{name: "internalTrafficPolicy Local, no client node", c: Client{},
			set:  viewSet(true, "1.1.1.1:1 name1-1 node-1 - -"),
			want: ""},
		// TestEndpointSliceSelectsAddressFamilyAfterZoneFiltering
		{name: "IPv6 on: the IPv6 address of a dual-stack pod", cfg: func(c *Config) { c.EnableIPv6 = true }, c: west,
			set:  viewSet(false, "1.1.1.1:1 name1-1 - - west-1a", "[2001:db8:85a3::8a2e:370:7333]:1 name1-1 - - west-1a"),
			want: "[2001:db8:85a3::8a2e:370:7333]:1 unknown"},
		{name: "IPv6 on, its IPv6 address hinted elsewhere", cfg: func(c *Config) { c.EnableIPv6 = true }, c: west,
			set:  viewSet(false, "1.1.1.1:1 name1-1 - - west-1a", "[2001:db8:85a3::8a2e:370:7333]:1 name1-1 - - west-1b"),
			want: "1.1.1.1:1 unknown"},
		{name: "IPv6 off: the IPv4 address of a dual-stack pod", c: Client{},
			set:  viewSet(false, "1.1.1.1:1 name1-1 - - -", "[2001:db8::1]:1 name1-1 - - -", "[2001:db8::2]:1 name1-2 - - -"),
			want: "1.1.1.1:1 unknown, [2001:db8::2]:1 unknown"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			if tc.cfg != nil {
				tc.cfg(&cfg)
			}
			before := viewOf(tc.set)
			got := View(cfg, tc.set, tc.c, nil)
			if viewOf(got) != tc.want || (got == tc.set) != tc.same {
				t.Fatalf("view %q (the set itself: %v), want %q (%v)", viewOf(got), got == tc.set, tc.want, tc.same)
			}
			if viewOf(tc.set) != before {
				t.Fatal("View modified the set")
			}
		})
	}
}

// TestViewReusesPrev checks that a view computed again from a set whose endpoints did not
// change takes its relabelled endpoints over from the previous view.
func TestViewReusesPrev(t *testing.T) {
	cfg := DefaultConfig()
	c := Client{Node: "test-123", Zone: "west-1a"}
	base := viewSet(false, "7.9.7.9:7979 - - west-1a -", "9.7.9.7:9797 - - west-1b -")
	first := View(cfg, base, c, nil)
	extra := viewSet(false, "1.2.3.4:1 - - west-1b -")
	next := &snapshot.AddressSet{Exists: true, Endpoints: snapshot.SortEndpoints(append(slices.Clone(base.Endpoints), extra.Endpoints...))}
	second := View(cfg, next, c, &Prev{Set: base, View: first})
	for _, e := range first.Endpoints {
		if second.Lookup(e.Addr) != e {
			t.Fatalf("%v translated again", e.Addr)
		}
	}
	if viewOf(second) != "1.2.3.4:1 remote, 7.9.7.9:7979 local, 9.7.9.7:9797 remote" {
		t.Fatalf("second view %q", viewOf(second))
	}
	if !slices.Equal(first.Labels, base.Labels) {
		t.Fatal("set labels changed")
	}
}

// FuzzView checks View's invariants on arbitrary sets and clients: a view holds endpoints of
// the set only, at most one family per pod, only same-node pods under the Local policy; its
// zone_locality says where an endpoint is against the client's zone; only local endpoints
// weigh more; and the set is not modified.
func FuzzView(f *testing.F) {
	f.Add([]byte{}, false)
	f.Add([]byte("a set of a few endpoints with zones, hints, nodes and both families"), true)
	f.Fuzz(func(t *testing.T, data []byte, weights bool) {
		r := testutil.NewFuzzBytes(data)
		zones := []string{"", "west-1a", "west-1b"}
		nodes := []string{"", "node-1", "node-2"}
		set := &snapshot.AddressSet{Exists: true, LocalTrafficPolicy: r.Pick(4) == 0}
		for range r.Pick(8) {
			var a netip.Addr
			if r.Pick(2) == 0 {
				a = netip.AddrFrom4([4]byte{10, 0, 0, r.Byte() % 4})
			} else {
				a = netip.AddrFrom16([16]byte{0xfd, 15: r.Byte() % 4})
			}
			e := &snapshot.Endpoint{Addr: netip.AddrPortFrom(a, 80), Weight: DefaultWeight}
			name, ns := "", ""
			if p := r.Pick(3); p > 0 {
				name, ns = fmt.Sprintf("p%d", p), "ns"
			}
			e.SetPod(name, ns, pickFrom(r, nodes))
			if z := pickFrom(r, zones); z != "" {
				e.Labels = append(e.Labels, snapshot.Label{Key: LabelKeyZone, Value: z})
			}
			e.Labels = append(e.Labels, snapshot.Label{Key: LabelKeyZoneLocality, Value: ZoneUnknown})
			var forZones []string
			for range r.Pick(3) {
				if z := pickFrom(r, zones); z != "" && !slices.Contains(forZones, z) {
					forZones = append(forZones, z)
				}
			}
			slices.Sort(forZones)
			e.Rare = snapshot.NewRare("", forZones, "")
			set.Endpoints = append(set.Endpoints, e)
		}
		set.Endpoints = snapshot.SortEndpoints(set.Endpoints)
		cfg := DefaultConfig()
		cfg.EnableIPv6, cfg.ExtEndpointZoneWeights = r.Pick(2) == 0, weights
		c := Client{Node: pickFrom(r, nodes), Zone: pickFrom(r, zones)}
		before := viewOf(set)
		v := View(cfg, set, c, nil)
		if viewOf(set) != before {
			t.Fatal("View modified the set")
		}
		families := map[string]int{}
		for i, e := range v.Endpoints {
			a := e.Addr
			if i > 0 && v.Endpoints[i-1].Addr.Compare(a) >= 0 {
				t.Fatalf("%v after %v: the view is not in address order", a, v.Endpoints[i-1].Addr)
			}
			src := set.Lookup(a)
			if src == nil || e.PodName() != src.PodName() {
				t.Fatalf("%v: not an endpoint of the set", a)
			}
			if set.LocalTrafficPolicy && (e.PodName() == "" || e.NodeName() != c.Node) {
				t.Fatalf("%v on node %q served to a client on %q under the Local policy", a, e.NodeName(), c.Node)
			}
			if e.PodName() != "" {
				families[e.PodName()] |= 1 << b2i(a.Addr().Is6())
			}
			want := ZoneUnknown
			if z := e.Label(LabelKeyZone); z != "" && c.Zone != "" {
				want = map[bool]string{true: ZoneLocal, false: ZoneRemote}[z == c.Zone]
			}
			if got := e.Label(LabelKeyZoneLocality); got != want {
				t.Fatalf("%v: zone_locality %q, want %q", a, got, want)
			}
			if heavy := e.Weight != DefaultWeight; heavy != (weights && want == ZoneLocal) {
				t.Fatalf("%v: weight %d (locality %s, weights %v)", a, e.Weight, want, weights)
			}
		}
		for p, f := range families {
			if f == 3 {
				t.Fatalf("pod %s served by both families", p)
			}
		}
	})
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
