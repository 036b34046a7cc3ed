package translator

import (
	"net/netip"
	"slices"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/meridian-mesh/meridian/snapshot"
)

// TestPodlessLabelsShared checks that the addresses without a pod of one zone share one
// label slice that no append can write into, and that each zone (a zone named "unknown" and
// no zone among them) gets its own labels.
func TestPodlessLabelsShared(t *testing.T) {
	zones := []string{"a", "b", "a", "", "unknown", "b", ""}
	var eps []discoveryv1.Endpoint
	for i, z := range zones {
		e := endpoint("", netip.AddrFrom4([4]byte{10, 0, 0, byte(i + 1)}).String())
		if z != "" {
			e = withZone(e, z)
		}
		eps = append(eps, e)
	}
	svc := service("ns", "web", sport("http", 80))
	set := addressSet(DefaultConfig(), svc, 80, []*discoveryv1.EndpointSlice{
		eslice("ns", "web-1", "web", v4, []discoveryv1.EndpointPort{eport("http", 8080)}, eps...)}, nil)
	first := map[string][]snapshot.Label{}
	for i, z := range zones {
		e := set.Lookup(netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, 0, byte(i + 1)}), 8080))
		want := []snapshot.Label{{Key: LabelKeyZoneLocality, Value: ZoneUnknown}}
		if z != "" {
			want = append([]snapshot.Label{{Key: LabelKeyZone, Value: z}}, want...)
		}
		if !slices.Equal(e.Labels, want) {
			t.Fatalf("address %d (zone %q): labels %v, want %v", i, z, e.Labels, want)
		}
		if cap(e.Labels) != len(e.Labels) {
			t.Errorf("address %d: labels have room to append into (cap %d, len %d)", i, cap(e.Labels), len(e.Labels))
		}
		if f, ok := first[z]; ok && &f[0] != &e.Labels[0] {
			t.Errorf("address %d (zone %q): labels not shared with the zone's first address", i, z)
		}
		first[z] = e.Labels
	}
}
