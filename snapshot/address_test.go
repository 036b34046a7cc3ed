package snapshot

import (
	"net/netip"
	"slices"
	"testing"
	"unsafe"
)

// An Endpoint's size is what a snapshot holds per address: the rare fields stay behind one
// pointer, the pod's namespace and node behind one handle. (A guard against growing it
// unawares; on 64-bit machines.)
func TestEndpointSize(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("sizes are for 64-bit machines")
	}
	if got := unsafe.Sizeof(Endpoint{}); got > 104 {
		t.Errorf("snapshot.Endpoint is %d bytes, want at most 104: put what few endpoints have in Rare", got)
	}
}

// A nil Rare reads and compares as all empty.
func TestRare(t *testing.T) {
	if r := NewRare("", nil, ""); r != nil {
		t.Fatalf("NewRare of nothing = %+v, want nil", r)
	}
	var e Endpoint
	if e.Hostname() != "" || e.ForZones() != nil || e.AuthorityOverride() != "" {
		t.Fatal("an endpoint without Rare has rare values")
	}
	a := Endpoint{Rare: NewRare("web-0", []string{"z1"}, "x:80")}
	b := Endpoint{Rare: NewRare("web-0", []string{"z1"}, "x:80")}
	if !a.Equal(&b) || a.Hostname() != "web-0" || a.ForZones()[0] != "z1" || a.AuthorityOverride() != "x:80" {
		t.Fatalf("equal rare values: %+v %+v", a.Rare, b.Rare)
	}
	for _, r := range []*Rare{nil, {}, NewRare("web-1", []string{"z1"}, "x:80"), NewRare("web-0", []string{"z2"}, "x:80"), NewRare("web-0", []string{"z1"}, "")} {
		o := Endpoint{Rare: r}
		if a.Equal(&o) {
			t.Errorf("%+v equals %+v", a.Rare, r)
		}
	}
	if empty := (Endpoint{Rare: &Rare{}}); !e.Equal(&empty) {
		t.Error("a nil Rare and an empty one differ")
	}
}

// An endpoint without a pod reads as none; equal places make one handle (the zero PodPlace
// the zero Handle), the pod's name is not copied, and endpoints compare by the name and
// every field of the place.
func TestPodPlace(t *testing.T) {
	var e Endpoint
	if e.PodRef() != (PodRef{}) || e.PodName() != "" || e.PodNamespace() != "" || e.NodeName() != "" {
		t.Fatal("an endpoint without a pod has pod values")
	}
	if h := MakePodPlace(PodPlace{}); h != e.Place {
		t.Fatal("MakePodPlace of nothing is not the zero handle")
	}
	if e.SetPod("", "", ""); e.Place != MakePodPlace(PodPlace{}) || e.Pod != "" {
		t.Fatal("SetPod of nothing is not the zero handle")
	}
	ref := PodRef{Name: "web-0", Namespace: "shop", NodeName: "n1"}
	name := string([]byte("web-0"))
	a := Endpoint{Pod: "web-0", Place: MakePodPlace(PodPlace{Namespace: "shop", NodeName: "n1"})}
	var b Endpoint
	b.SetPod(name, string([]byte("shop")), "n1")
	if a.Place != b.Place || !a.Equal(&b) || a.PodRef() != ref || b.PodRef() != ref || a.PodName() != "web-0" || a.PodNamespace() != "shop" || a.NodeName() != "n1" {
		t.Fatalf("equal pods: %+v %+v", a.PodRef(), b.PodRef())
	}
	if unsafe.StringData(b.Pod) != unsafe.StringData(name) {
		t.Error("SetPod copied the pod's name")
	}
	if n := (Endpoint{Place: MakePodPlace(PodPlace{NodeName: "n1"})}); n.PodName() != "" || n.PodNamespace() != "" || n.NodeName() != "n1" {
		t.Errorf("a node without a pod: %+v", n.PodRef())
	}
	for _, r := range []PodRef{{}, {Name: "web-1", Namespace: "shop", NodeName: "n1"}, {Name: "web-0", Namespace: "other", NodeName: "n1"}, {Name: "web-0", Namespace: "shop"}} {
		var o Endpoint
		o.SetPod(r.Name, r.Namespace, r.NodeName)
		if a.Equal(&o) {
			t.Errorf("%+v equals %+v", a.PodRef(), r)
		}
	}
}

// SortEndpoints puts a set's endpoints in address order and keeps the first of an address
// given twice; Lookup finds each by binary search; Diff merges two sorted sets in order.
func TestSortedEndpoints(t *testing.T) {
	first, second := ep(5), ep(5)
	second.SetIdentity("later")
	eps := SortEndpoints([]*Endpoint{ep(9), first, ep(1), second, ep(3)})
	var got []string
	for _, e := range eps {
		got = append(got, e.Addr.String())
	}
	if want := []string{"10.0.0.1:8080", "10.0.0.3:8080", "10.0.0.5:8080", "10.0.0.9:8080"}; !slices.Equal(got, want) {
		t.Fatalf("sorted %v, want %v", got, want)
	}
	s := &AddressSet{Exists: true, Endpoints: eps}
	if s.Lookup(ep(5).Addr) != first {
		t.Fatal("the second endpoint of an address won")
	}
	if s.Lookup(ep(4).Addr) != nil || (*AddressSet)(nil).Lookup(ep(1).Addr) != nil {
		t.Fatal("Lookup found an address that is not there")
	}
	changed := *ep(3)
	changed.Weight = 1
	next := &AddressSet{Exists: true, Endpoints: SortEndpoints([]*Endpoint{ep(2), &changed, ep(5), ep(10)})}
	d := Diff(s, next)
	var add, rm []string
	for _, e := range d.Add {
		add = append(add, e.Addr.String())
	}
	for _, a := range d.Remove {
		rm = append(rm, a.String())
	}
	if !slices.Equal(add, []string{"10.0.0.2:8080", "10.0.0.3:8080", "10.0.0.10:8080"}) || !slices.Equal(rm, []string{"10.0.0.1:8080", "10.0.0.9:8080"}) {
		t.Fatalf("Diff: add %v, remove %v", add, rm)
	}
	if d := Diff(nil, s); !slices.Equal(d.Add, s.Endpoints) || len(d.Remove) != 0 {
		t.Fatalf("Diff from nothing: %+v", d)
	} else if cap(d.Add) != len(d.Add) {
		// It is the set's own slice: an append to it must not write into the set.
		t.Fatalf("Diff from nothing: Add has room (cap %d, len %d) to append into the set", cap(d.Add), len(d.Add))
	}
	// A stream's first delta allocates nothing: in a storm of new streams, that garbage is
	// what the collector runs for.
	if n := testing.AllocsPerRun(100, func() { _ = Diff(nil, s) }); n != 0 {
		t.Fatalf("Diff from nothing: %v allocations, want 0", n)
	}
	if d := Diff(&AddressSet{Exists: true, Endpoints: []*Endpoint{}}, s); !slices.Equal(d.Add, s.Endpoints) || len(d.Remove) != 0 {
		t.Fatalf("Diff from an empty set: %+v", d)
	}
	if d := Diff(s, nil); len(d.Add) != 0 || !slices.Equal(d.Remove, []netip.AddrPort{ep(1).Addr, ep(3).Addr, ep(5).Addr, ep(9).Addr}) {
		t.Fatalf("Diff to nothing: %+v", d)
	}
}
