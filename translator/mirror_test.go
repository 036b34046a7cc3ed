package translator

import (
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
)

// TestAddressSetMirror follows linkerd2's TestEndpointsWatcherServiceMirrors
// (controller/api/destination/watcher/endpoints_watcher_test.go) at the translation: the
// gateway identity and the authority at the port asked for, the target labels, and that
// taking endpoints over from an earlier set notices a change of the annotations.
func TestAddressSetMirror(t *testing.T) {
	cfg := DefaultConfig()
	svc := service("ns", "name1-remote", sport("", 8989))
	mk := func(ann map[string]string, port int32) *discoveryv1.EndpointSlice {
		es := eslice("ns", "name1-remote-xxxx", "name1-remote", v4, []discoveryv1.EndpointPort{eport("", port)}, endpoint("", "172.17.0.12"))
		es.Annotations = ann
		es.Labels[LabelRemoteClusterName] = "east"
		return es
	}
	ann := map[string]string{AnnotationRemoteGatewayIdentity: "gateway-identity-1", AnnotationRemoteServiceFQName: "name1.remote-ns.svc.cluster.local"}
	first := addressSet(cfg, svc, 8989, []*discoveryv1.EndpointSlice{mk(ann, 9999)}, nil)
	want := "172.17.0.12:9999 id=gateway-identity-1 hint=h2 h2c authority=name1.remote-ns.svc.cluster.local:8989"
	if got := renderSet(first); len(got) != 1 || got[0] != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	if l := first.Labels; len(l) != 5 || l[2].Key != LabelKeyTargetCluster || l[2].Value != "east" || l[3].Value != "name1" || l[4].Value != "remote-ns" {
		t.Fatalf("set labels %v", l)
	}
	// The same inputs reuse the endpoint; a new identity or authority does not.
	if again := AddressSetReusing(cfg, Inputs{Service: svc, Slices: slimSlices([]*discoveryv1.EndpointSlice{mk(ann, 9999)})}, 8989, Reuse{Prev: first}); again.Lookup(first.Endpoints[0].Addr) != first.Endpoints[0] {
		t.Fatal("an unchanged mirror endpoint translated again")
	}
	for _, changed := range []map[string]string{
		{AnnotationRemoteGatewayIdentity: "gateway-identity-2", AnnotationRemoteServiceFQName: "name1.remote-ns.svc.cluster.local"},
		{AnnotationRemoteGatewayIdentity: "gateway-identity-1"},
		nil,
	} {
		got := AddressSetReusing(cfg, Inputs{Service: svc, Slices: slimSlices([]*discoveryv1.EndpointSlice{mk(changed, 9999)})}, 8989, Reuse{Prev: first})
		if want := addressSet(cfg, svc, 8989, []*discoveryv1.EndpointSlice{mk(changed, 9999)}, nil); !got.Equal(want) {
			t.Fatalf("annotations %v: reusing gives %q, want %q", changed, renderSet(got), renderSet(want))
		}
	}
}
