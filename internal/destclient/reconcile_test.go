package destclient

import (
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"testing"

	pb "github.com/linkerd/linkerd2-proxy-api/go/destination"
	pbnet "github.com/linkerd/linkerd2-proxy-api/go/net"
	"google.golang.org/protobuf/proto"

	"github.com/meridian-mesh/meridian/internal/wire"
)

func add(labels map[string]string, addrs ...string) *pb.Update {
	var was []*pb.WeightedAddr
	for _, a := range addrs {
		was = append(was, &pb.WeightedAddr{Addr: wire.TCPAddr(netip.MustParseAddrPort(a)), Weight: 10000})
	}
	return &pb.Update{Update: &pb.Update_Add{Add: &pb.WeightedAddrSet{Addrs: was, MetricLabels: labels}}}
}

func noEndpoints(exists bool) *pb.Update {
	return &pb.Update{Update: &pb.Update_NoEndpoints{NoEndpoints: &pb.NoEndpoints{Exists: exists}}}
}

func TestReconcileSendsOnlyDeltas(t *testing.T) {
	v := NewView()
	if err := v.Apply(add(nil, "10.0.0.1:80", "10.0.0.2:80")); err != nil {
		t.Fatal(err)
	}
	out, err := v.Reconcile(add(nil, "10.0.0.2:80", "10.0.0.3:80"))
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 2 || out[0].GetRemove() == nil || len(out[0].GetRemove().GetAddrs()) != 1 || len(out[1].GetAdd().GetAddrs()) != 1 {
		t.Fatalf("want one remove and one add, got %v", out)
	}
	// Same state again: nothing to send.
	out, _ = v.Reconcile(add(nil, "10.0.0.2:80", "10.0.0.3:80"))
	if len(out) != 0 {
		t.Fatalf("identical state must send nothing, got %v", out)
	}
	out, _ = v.Reconcile(noEndpoints(true))
	if len(out) != 1 || out[0].GetNoEndpoints() == nil || len(v.Addrs) != 0 {
		t.Fatalf("empty state: %v", out)
	}
	out, _ = v.Reconcile(noEndpoints(true))
	if len(out) != 0 {
		t.Fatalf("still empty: %v", out)
	}
	out, _ = v.Reconcile(add(nil, "10.0.0.9:80"))
	if len(out) != 1 || len(out[0].GetAdd().GetAddrs()) != 1 || v.NoEndpoints != nil {
		t.Fatalf("from empty: %v", out)
	}
	if _, err := v.Reconcile(&pb.Update{Update: &pb.Update_Remove{Remove: &pb.AddrSet{}}}); err == nil {
		t.Fatal("a Remove is not a full state")
	}
}

func TestReconcileFreshViewSendsFullState(t *testing.T) {
	v := NewView()
	out, _ := v.Reconcile(add(map[string]string{"service": "web"}, "10.0.0.1:80"))
	if len(out) != 1 || out[0].GetAdd().GetMetricLabels()["service"] != "web" {
		t.Fatalf("fresh view: %v", out)
	}
	v = NewView()
	out, _ = v.Reconcile(noEndpoints(false))
	if len(out) != 1 || out[0].GetNoEndpoints().GetExists() {
		t.Fatalf("fresh view, no service: %v", out)
	}
}

// Held reconciles exactly as View does, from its compact state.
func TestHeldMatchesView(t *testing.T) {
	steps := []*pb.Update{
		add(nil, "10.0.0.1:80", "10.0.0.2:80"),
		add(nil, "10.0.0.2:80", "10.0.0.3:80"),
		noEndpoints(true),
		noEndpoints(false),
		add(map[string]string{"service": "web"}, "10.0.0.9:80"),
		add(nil, "10.0.0.9:80"),
	}
	v, h := NewView(), NewHeld()
	for i, full := range steps {
		vo, err := v.Reconcile(full)
		if err != nil {
			t.Fatal(err)
		}
		ho, err := h.Reconcile(full)
		if err != nil {
			t.Fatal(err)
		}
		if len(vo) != len(ho) {
			t.Fatalf("step %d: view sends %v, held sends %v", i, vo, ho)
		}
		for j := range vo {
			if !proto.Equal(vo[j], ho[j]) {
				t.Fatalf("step %d: view sends %v, held sends %v", i, vo[j], ho[j])
			}
		}
		if h.Len() != len(v.Addrs) {
			t.Fatalf("step %d: held %d, view %d", i, h.Len(), len(v.Addrs))
		}
	}
	// A changed address (same IP, other weight) is sent again.
	changed := add(nil, "10.0.0.9:80")
	changed.GetAdd().GetAddrs()[0].Weight = 5
	if out, _ := h.Reconcile(changed); len(out) != 1 || len(out[0].GetAdd().GetAddrs()) != 1 {
		t.Fatalf("changed metadata must be re-added: %v", out)
	}
	if err := h.Apply(&pb.Update{Update: &pb.Update_Remove{Remove: &pb.AddrSet{Addrs: []*pbnet.TcpAddress{changed.GetAdd().GetAddrs()[0].GetAddr()}}}}); err != nil || h.Len() != 0 {
		t.Fatalf("remove: %v, %d held", err, h.Len())
	}
}

// TestHeldApplyRaw checks that an encoded update applied without decoding leaves the same
// state as the decoded one: the same reconciliation afterwards.
func TestHeldApplyRaw(t *testing.T) {
	ups := []*pb.Update{
		add(map[string]string{"service": "web"}, "10.0.0.1:80", "10.0.0.2:80", "[fd00::1]:80"),
		{Update: &pb.Update_Remove{Remove: &pb.AddrSet{Addrs: []*pbnet.TcpAddress{wire.TCPAddr(netip.MustParseAddrPort("10.0.0.2:80"))}}}},
		noEndpoints(true),
		add(nil, "10.0.0.3:80"),
	}
	dec, raw := NewHeld(), NewHeld()
	for i, u := range ups {
		applyBoth(t, i, dec, raw, u)
		if !reflect.DeepEqual(dec, raw) {
			t.Fatalf("after update %d: decoded %+v, raw %+v", i, dec, raw)
		}
	}
	b, _ := proto.Marshal(&pb.Update{Update: &pb.Update_Remove{Remove: &pb.AddrSet{Addrs: []*pbnet.TcpAddress{wire.TCPAddr(netip.MustParseAddrPort("10.9.9.9:80"))}}}})
	if _, err := raw.ApplyRaw(b); err == nil {
		t.Error("remove of an address never added: no error")
	}
	// An update ScanUpdate refuses after reading addresses (an Add, then a Remove of what
	// it held, then a truncated Add) changes nothing.
	addB, _ := proto.Marshal(add(nil, "10.0.0.4:80", "10.0.0.5:80"))
	rmB, _ := proto.Marshal(&pb.Update{Update: &pb.Update_Remove{Remove: &pb.AddrSet{Addrs: []*pbnet.TcpAddress{wire.TCPAddr(netip.MustParseAddrPort("10.0.0.3:80"))}}}})
	for name, bad := range map[string][]byte{
		"an add and a remove": append(slices.Clone(addB), rmB...),
		"a truncated add":     addB[:len(addB)-2],
	} {
		before := cloneHeld(raw)
		if _, err := raw.ApplyRaw(bad); err == nil {
			t.Errorf("%s: no error", name)
		}
		if !reflect.DeepEqual(raw, before) {
			t.Errorf("%s: refused, but the held state changed: %+v, was %+v", name, raw, before)
		}
	}
}

// cloneHeld copies h, arrays and all.
func cloneHeld(h *Held) *Held {
	c := *h
	c.addrs = heldSet{v4: slices.Clone(h.addrs.v4), v6: slices.Clone(h.addrs.v6)}
	return &c
}

// applyBoth applies update i, u, to dec decoded and to raw encoded (ApplyRaw).
func applyBoth(t *testing.T, i int, dec, raw *Held, u *pb.Update) {
	t.Helper()
	if err := dec.Apply(u); err != nil {
		t.Fatalf("update %d: %v", i, err)
	}
	b, err := proto.Marshal(u)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.ApplyRaw(b); err != nil {
		t.Fatalf("update %d: %v", i, err)
	}
}

// TestApplyRawSharesNoArray applies Adds of IPv4, IPv6 and mixed addresses to many Helds in
// turn: ApplyRaw gathers each in a pooled array (addScratch), and no Held may keep one that a
// later ApplyRaw writes into. Each must end as its decoded twin.
func TestApplyRawSharesNoArray(t *testing.T) {
	var dec, raw []*Held
	for i := range 3 * 80 {
		n := 1 + i/3 // every size: some fill a pooled array exactly, which putAll could keep
		addrs := make([]string, n)
		for j := range addrs {
			switch i % 3 {
			case 0:
				addrs[j] = fmt.Sprintf("10.%d.0.%d:80", i%250, j)
			case 1:
				addrs[j] = fmt.Sprintf("[fd00::%x:%x]:80", i, j)
			default:
				addrs[j] = []string{fmt.Sprintf("10.%d.1.%d:80", i%250, j), fmt.Sprintf("[fd01::%x:%x]:80", i, j)}[j%2]
			}
		}
		u := add(map[string]string{"n": fmt.Sprint(i)}, addrs...)
		d, r := NewHeld(), NewHeld()
		applyBoth(t, i, d, r, u)
		dec, raw = append(dec, d), append(raw, r)
	}
	for i := range dec {
		if !reflect.DeepEqual(dec[i], raw[i]) {
			t.Fatalf("Held %d changed after later ApplyRaw calls: decoded %+v, raw %+v", i, dec[i], raw[i])
		}
	}
}

// TestApplyRawAllocations checks that applying a 100-address IPv4 Add to a new Held allocates
// only the Held and the set's own array: the addresses are gathered in a pooled array, not
// one grown address by address (a relaying replica applies every first Add it relays).
func TestApplyRawAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's sync.Pool drops items at random")
	}
	addrs := make([]string, 100)
	for j := range addrs {
		addrs[j] = fmt.Sprintf("10.1.0.%d:80", j)
	}
	b, err := proto.Marshal(add(nil, addrs...))
	if err != nil {
		t.Fatal(err)
	}
	n := testing.AllocsPerRun(100, func() {
		if _, err := NewHeld().ApplyRaw(b); err != nil {
			t.Fatal(err)
		}
	})
	if n > 2 {
		t.Fatalf("ApplyRaw of a 100-address Add: %v allocations, want at most 2", n)
	}
}
