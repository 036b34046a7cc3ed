package shard

import (
	"fmt"
	"strings"
	"testing"
	"time"

	pb "github.com/linkerd/linkerd2-proxy-api/go/destination"
)

// opaqueServer is the Server of linkerd2's testOpaque fixture (policyResources and
// policyResourcesNativeSidecar of controller/api/destination/test_util.go), with the pod
// selector's app label, port and protocol given.
func opaqueServer(name, app, port, protocol string) string {
	return fmt.Sprintf(`apiVersion: policy.linkerd.io/v1beta3
kind: Server
metadata: {name: %s, namespace: ns}
spec:
  podSelector:
    matchLabels: {app: %s}
  port: %s
  proxyProtocol: %s
`, name, app, port, protocol)
}

// opaqueTransport returns whether the only address of an Add has opaque transport.
func opaqueTransport(t *testing.T, u *pb.Update) bool {
	t.Helper()
	a := u.GetAdd().GetAddrs()
	if len(a) != 1 {
		t.Fatalf("update %s %v, want one address added", kind(u), addrs(u))
	}
	return a[0].GetProtocolHint().GetOpaqueTransport() != nil
}

// TestServerOpaque mirrors linkerd2's testOpaque (server_test.go's "Return endpoint opaque
// protocol controlled by a server" and its native-sidecar twin): a Server with proxyProtocol
// opaque that selects the pod's port makes it opaque; a selector that no longer selects the
// pod sends the endpoint again without, and one that selects it again with. A protocol change
// (not in Linkerd's test) re-sends it too.
func TestServerOpaque(t *testing.T) {
	e := newDirEnv(t, parityConfig(), "linkerd")
	for _, c := range []struct{ name, port, file string }{{"policy-test", "80", "policy.yaml"}, {"native", "http", "policy.yaml"}} {
		t.Run(c.name, func(t *testing.T) {
			// The fixture's Server moves to a file of its own, which the test rewrites.
			removeDoc(t, e, c.file, "kind: Server", "name: "+c.name+", namespace: ns}")
			file := "server-" + c.name + ".yaml"
			e.write(file, opaqueServer(c.name, c.name, c.port, "opaque"))
			s := e.get(fmt.Sprintf("%s.ns.svc.mycluster.local:80", c.name), "")
			u := s.next(t)
			for !opaqueTransport(t, u) { // the Server may follow the endpoints by a scan
				u = s.next(t)
			}
			for i, step := range []struct {
				app, protocol string
				opaque        bool
			}{{"FOOBAR", "opaque", false}, {c.name, "opaque", true}, {c.name, "HTTP/1", false}, {c.name, "opaque", true}} {
				e.write(file, opaqueServer(c.name, step.app, c.port, step.protocol))
				if u := s.next(t); opaqueTransport(t, u) != step.opaque {
					t.Fatalf("step %d (app %s, %s): opaque transport %v, want %v: %v", i, step.app, step.protocol, !step.opaque, step.opaque, u)
				}
			}
		})
	}
}

// removeDoc rewrites the fixture file name without its documents that contain every one of
// marks.
func removeDoc(t *testing.T, e *dirEnv, name string, marks ...string) {
	t.Helper()
	docs := strings.Split(readFile(t, e.dir+"/"+name), "\n---\n")
	kept := docs[:0]
	for _, d := range docs {
		all := true
		for _, m := range marks {
			all = all && strings.Contains(d, m)
		}
		if !all {
			kept = append(kept, d)
		}
	}
	if len(kept) == len(docs) {
		t.Fatalf("%s has no document with %q", name, marks)
	}
	e.write(name, strings.Join(kept, "\n---\n"))
}

// serverOtherNSFixture is TestServerCannotSetOpaqueProtocolForPodsInOtherNamespaces's
// service name1 of pod-ns and its meshed pod name1-1 (labelled app=name1).
var serverOtherNSFixture = lbService("pod-ns", "name1", 8989, "") + sliceHead("pod-ns", "name1", "name1", "IPv4", "[{port: 8989}]") + `endpoints:
- addresses: [172.17.0.12]
  targetRef: {kind: Pod, name: name1-1, namespace: pod-ns}
---
apiVersion: v1
kind: Pod
metadata: {name: name1-1, namespace: pod-ns, labels: {app: name1, linkerd.io/control-plane-ns: linkerd}}
status: {phase: Running, podIP: 172.17.0.12}
`

// TestServerOtherNamespace mirrors TestServerCannotSetOpaqueProtocolForPodsInOtherNamespaces
// (watcher/endpoints_watcher_test.go; Linkerd's fixture uses Endpoints, this the equivalent
// EndpointSlice): a Server in another namespace that selects the pod's labels has no effect.
func TestServerOtherNamespace(t *testing.T) {
	e := newDirEnv(t, DefaultConfig(), "")
	e.write("svc.yaml", serverOtherNSFixture)
	waitService(t, e.replica, "pod-ns", "name1")
	s := e.get("name1.pod-ns.svc.cluster.local:8989", "")
	if u := s.next(t); opaqueTransport(t, u) {
		t.Fatalf("opaque before any Server: %v", u)
	}
	e.write("server.yaml", `apiVersion: policy.linkerd.io/v1beta3
kind: Server
metadata: {name: name1, namespace: server-ns}
spec:
  podSelector:
    matchLabels: {app: name1}
  port: 8989
  proxyProtocol: opaque
`)
	s.quiet(t, 500*time.Millisecond)
	p := e.profile("172.17.0.12:8989", "")
	if got := p.next(t); got.GetOpaqueProtocol() {
		t.Fatalf("the pod's profile is opaque by a Server of another namespace: %v", got)
	}
}
