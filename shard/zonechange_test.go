package shard

import (
	"testing"

	"go.uber.org/zap"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meridian-mesh/meridian/internal/metrics"
	"github.com/meridian-mesh/meridian/snapshot"
	"github.com/meridian-mesh/meridian/translator"
)

func zoneNode(name, zone string) *metav1.PartialObjectMetadata {
	n := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if zone != "" {
		n.Labels = map[string]string{"topology.kubernetes.io/zone": zone}
	}
	return n
}

// TestNodeZoneChangeRelocalizes: when a client's Node moves to another zone, its view is
// computed again for the new zone (its published endpoints carried the old zone's locality,
// and were taken over unchanged).
func TestNodeZoneChangeRelocalizes(t *testing.T) {
	store := snapshot.NewStore(snapshot.StoreConfig{})
	x := NewIndex(DefaultConfig(), store, nil, newMetrics(metrics.Exclusive(nil)), zap.NewNop())
	x.OnNode(zoneNode("n1", "west-1a"), false)
	x.OnService(svcObj("ns", "web"), false)
	x.OnEndpointSlice(zonedSlice("10.0.0.1", "west-1a", "10.0.0.2", "west-1b"), false)
	k := NewServiceKey("ns", "web")
	x.recompute(k)
	_, release := x.Watch(k, 80, "n1")
	defer release()
	show := func(when string) map[string]string {
		out := map[string]string{}
		snap := store.Load(viewKey(k, 80, "n1"))
		for _, e := range snap.Set.Endpoints {
			out[e.Addr.String()] = e.Label("zone_locality")
		}
		t.Logf("%s: zone(n1)=%q view=%v", when, x.cluster.zone("n1"), out)
		return out
	}
	show("n1 in west-1a")
	x.OnNode(zoneNode("n1", "west-1b"), false) // the Node's zone changes: OnNode queues k
	x.recompute(k)
	got := show("n1 moved to west-1b")
	if got["10.0.0.1:8080"] != "remote" || got["10.0.0.2:8080"] != "local" {
		t.Errorf("after n1 moved to west-1b, its view is %v; want 10.0.0.1 remote, 10.0.0.2 local", got)
	}
}

// TestNodeZoneLearnedLate: a view computed before its Node was known gets its zone's locality
// once the Node arrives.
func TestNodeZoneLearnedLate(t *testing.T) {
	store := snapshot.NewStore(snapshot.StoreConfig{})
	x := NewIndex(DefaultConfig(), store, nil, newMetrics(metrics.Exclusive(nil)), zap.NewNop())
	x.OnService(svcObj("ns", "web"), false)
	x.OnEndpointSlice(zonedSlice("10.0.0.1", "west-1a"), false)
	k := NewServiceKey("ns", "web")
	x.recompute(k)
	_, release := x.Watch(k, 80, "n1") // n1's Node not seen yet
	defer release()
	x.OnNode(zoneNode("n1", "west-1a"), false)
	x.recompute(k)
	e := store.Load(viewKey(k, 80, "n1")).Set.Endpoints[0]
	if e.Label("zone_locality") != "local" {
		t.Errorf("after n1's zone became known, 10.0.0.1 is zone_locality=%q, want local", e.Label("zone_locality"))
	}
}

// zonedSlice is service ns/web's slice s1 of ready endpoints on 8080, given as address and
// zone pairs.
func zonedSlice(addrZone ...string) *translator.EndpointSlice {
	es := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "ns", Name: "s1", Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(int32(8080))}},
	}
	for i := 0; i+1 < len(addrZone); i += 2 {
		es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{Addresses: []string{addrZone[i]}, Zone: ptr(addrZone[i+1]),
			Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)}})
	}
	return translator.SlimEndpointSlice(es)
}
