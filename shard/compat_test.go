package shard

import (
	"fmt"
	"testing"
	"time"

	pb "github.com/linkerd/linkerd2-proxy-api/go/destination"

	"github.com/meridian-mesh/meridian/internal/testutil"
)

// The two deliberate differences from Linkerd's destination (the README's compatibility
// section), tested on the inputs of the linkerd2 tests that show Linkerd's behaviour.

// name1Fixture is the service of linkerd2's TestEndpointSliceScaleDown and TestPodChangeDetection
// (watcher/endpoints_watcher_test.go): name1:8989 with the one endpoint 172.17.0.12 of pod
// name1-1, the slice's endpoints and the pod's extra metadata given.
func name1Fixture(endpoints, podMeta string) string {
	return lbService("ns", "name1", 8989, "") + sliceHead("ns", "name1", "name1-es", "IPv4", "[{port: 8989}]") + fmt.Sprintf(`endpoints: %s
---
apiVersion: v1
kind: Pod
metadata: {name: name1-1, namespace: ns%s}
status: {phase: Running, podIP: 172.17.0.12}
`, endpoints, podMeta)
}

const name1Endpoint = `[{addresses: [172.17.0.12], hostname: name1-1, targetRef: {kind: Pod, name: name1-1, namespace: ns}}]`

// watchName1 starts a replica on name1Fixture with name1Endpoint and opens a Get stream of
// name1:8989, whose first update, an Add, it reads.
func watchName1(t *testing.T) (*dirEnv, *recvStream[pb.Update]) {
	t.Helper()
	e := newDirEnv(t, DefaultConfig(), "")
	e.write("svc.yaml", name1Fixture(name1Endpoint, ""))
	waitService(t, e.replica, "ns", "name1")
	s := e.get("name1.ns.svc.cluster.local:8989", "")
	if u := s.next(t); kind(u) != "add" {
		t.Fatalf("first update %s", kind(u))
	}
	return e, s
}

// TestEmptiedAndDeletedService: a service whose last endpoint goes is told
// NoEndpoints{exists: true}, and a deleted one NoEndpoints{exists: false}, where Linkerd sends
// a Remove of the addresses (TestEndpointSliceScaleDown, TestEndpointsWatcherDeletionWithEndpointSlices);
// the proxy API's contract makes the two equivalent, and NoEndpoints also says whether the
// service exists.
func TestEmptiedAndDeletedService(t *testing.T) {
	e, s := watchName1(t)
	e.write("svc.yaml", name1Fixture("[]", ""))
	if u := s.next(t); kind(u) != "no_endpoints(exists=true)" {
		t.Fatalf("the slice emptied: %s %v, want no_endpoints(exists=true)", kind(u), addrs(u))
	}
	e.write("svc.yaml", "")
	if u := s.next(t); kind(u) != "no_endpoints(exists=false)" {
		t.Fatalf("the service deleted: %s, want no_endpoints(exists=false)", kind(u))
	}
}

// TestPodUpdateInvisibleSendsNothing: a pod update that changes nothing a proxy sees (here a
// new label that no metric label or Server reads) sends nothing, where Linkerd sends the Add again for every
// new resourceVersion (TestPodChangeDetection, "will update pod if resource version is
// different"); a change a proxy sees (the pod meshed) is sent.
func TestPodUpdateInvisibleSendsNothing(t *testing.T) {
	e, s := watchName1(t)
	e.write("svc.yaml", name1Fixture(name1Endpoint, ", labels: {example.com/build: \"2\"}"))
	// The source delivered the new version (the projection keeps every label)...
	testutil.Eventually(t, 10*time.Second, "the pod's new version", func() bool {
		p := e.replica.Index().pods("ns", "name1-1")
		return p != nil && p.Label("example.com/build") == "2"
	})
	// ...and the stream receives nothing.
	s.quiet(t, 500*time.Millisecond)
	e.write("svc.yaml", name1Fixture(name1Endpoint, ", labels: {linkerd.io/control-plane-ns: linkerd}"))
	if u := s.next(t); kind(u) != "add" || u.GetAdd().GetAddrs()[0].GetTlsIdentity() == nil {
		t.Fatalf("the pod meshed: %s %v, want its address with an identity", kind(u), u)
	}
}
