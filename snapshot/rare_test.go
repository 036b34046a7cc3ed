package snapshot

import (
	"testing"
	"unsafe"
)

// An Endpoint's size is what a snapshot holds per address: the rare fields stay behind one
// pointer. (A guard against growing it unawares; on 64-bit machines.)
func TestEndpointSize(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("sizes are for 64-bit machines")
	}
	if got := unsafe.Sizeof(Endpoint{}); got > 136 {
		t.Errorf("snapshot.Endpoint is %d bytes, want at most 136: put what few endpoints have in Rare", got)
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
