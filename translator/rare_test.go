package translator

import (
	"net/netip"
	"slices"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/meridian-mesh/meridian/snapshot"
)

func withHints(e discoveryv1.Endpoint, zones ...string) discoveryv1.Endpoint {
	e.Hints = &discoveryv1.EndpointHints{}
	for _, z := range zones {
		e.Hints.ForZones = append(e.Hints.ForZones, discoveryv1.ForZone{Name: z})
	}
	return e
}

// What few endpoints have (a hostname, zone hints, an authority override) is kept behind
// one pointer, nil for the endpoints without any of it; endpoints hinted for the same zones
// (listed in any order, with repeats) and with nothing else rare share one.
func TestEndpointRare(t *testing.T) {
	sl := eslice("ns", "web-a", "web", v4, asPorts,
		withHints(endpoint("a", "10.0.0.1"), "z1"),
		withHints(endpoint("b", "10.0.0.2"), "z1"),
		withHints(endpoint("a", "10.0.0.3"), "z2", "z1", "z2"),
		withHints(endpoint("b", "10.0.0.4"), "z1", "z2"),
		withHostname(withHints(endpoint("a", "10.0.0.5"), "z1"), "web-5"),
		endpoint("b", "10.0.0.6"))
	set := addressSet(DefaultConfig(), asWeb, 80, []*discoveryv1.EndpointSlice{sl}, asPlain.lookup)
	at := func(ip string) *snapshot.Endpoint {
		e := set.Lookup(netip.AddrPortFrom(netip.MustParseAddr(ip), 8080))
		if e == nil {
			t.Fatalf("no endpoint %s in %v", ip, renderSet(set))
		}
		return e
	}
	e1, e2, e3, e4, e5, e6 := at("10.0.0.1"), at("10.0.0.2"), at("10.0.0.3"), at("10.0.0.4"), at("10.0.0.5"), at("10.0.0.6")
	if e1.Rare == nil || e1.Rare != e2.Rare || !slices.Equal(e1.ForZones(), []string{"z1"}) {
		t.Errorf("two endpoints hinted for z1: %+v and %+v, want one shared Rare", e1.Rare, e2.Rare)
	}
	if e3.Rare != e4.Rare || !slices.Equal(e3.ForZones(), []string{"z1", "z2"}) {
		t.Errorf("hinted for z2,z1,z2 and z1,z2: %+v and %+v, want one shared Rare of [z1 z2]", e3.Rare, e4.Rare)
	}
	if e5.Rare == e1.Rare || e5.Hostname() != "web-5" || !slices.Equal(e5.ForZones(), []string{"z1"}) {
		t.Errorf("a hostname and z1: %+v", e5.Rare)
	}
	if e6.Rare != nil || e6.Hostname() != "" || e6.ForZones() != nil || e6.AuthorityOverride() != "" {
		t.Errorf("an endpoint with nothing rare: %+v", e6.Rare)
	}
}
