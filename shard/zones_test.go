package shard

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	pb "github.com/linkerd/linkerd2-proxy-api/go/destination"

	"github.com/meridian-mesh/meridian/internal/testutil"
	"github.com/meridian-mesh/meridian/internal/wire"
)

// The tests of this file check the views of an address set that depend on the client's
// locality (its context token's node and that Node's zone), with the inputs of linkerd2's
// tests of the same behaviour (controller/api/destination/endpoint_translator_test.go and
// watcher/endpoints_watcher_test.go), each named in a comment.

const tokenTest123 = `{"ns":"ns","nodeName":"test-123"}`

// node is a Node manifest with a zone ("" for none).
func node(name, zone string) string {
	if zone == "" {
		return fmt.Sprintf("apiVersion: v1\nkind: Node\nmetadata: {name: %s}\n", name)
	}
	return fmt.Sprintf("apiVersion: v1\nkind: Node\nmetadata: {name: %s, labels: {topology.kubernetes.io/zone: %s}}\n", name, zone)
}

// lbService is the manifest of the LoadBalancer Service name in ns on port, with the lines
// of spec given ("  internalTrafficPolicy: Local\n"), as linkerd2's watcher tests declare
// their services.
func lbService(ns, name string, port int, spec string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: Service\nmetadata: {name: %s, namespace: %s}\nspec:\n  type: LoadBalancer\n%s  ports: [{port: %d}]\n", name, ns, spec, port)
}

// sliceHead starts another document ("---"): the EndpointSlice name of service in ns, its
// addressType family and ports (a YAML flow list); its endpoints follow.
func sliceHead(ns, service, name, family, ports string) string {
	return fmt.Sprintf("---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: %s, namespace: %s, labels: {kubernetes.io/service-name: %s}}\naddressType: %s\nports: %s\n",
		name, ns, service, family, ports)
}

// addrWeights returns the addresses of an Add, each with its weight, zone and zone_locality
// metric labels.
func addrWeights(t *testing.T, u *pb.Update) []string {
	t.Helper()
	var out []string
	for _, a := range u.GetAdd().GetAddrs() {
		ap, err := wire.ToAddrPort(a.GetAddr())
		if err != nil {
			t.Fatal(err)
		}
		l := a.GetMetricLabels()
		out = append(out, fmt.Sprintf("%s w=%d %s %s", ap, a.GetWeight(), l["zone"], l["zone_locality"]))
	}
	sort.Strings(out)
	return out
}

// zoneWeightsFixture is TestEndpointTranslatorExperimentalZoneWeights's: two endpoints
// without pods, 7.9.7.9:7979 in west-1a and 9.7.9.7:9797 in west-1b, and the client's node
// test-123 in west-1a (makeEndpointTranslator's Node).
var zoneWeightsFixture = `apiVersion: v1
kind: Service
metadata: {name: service-name, namespace: service-ns}
spec:
  ports: [{name: http, port: 80}]
` + sliceHead("service-ns", "service-name", "a", "IPv4", "[{name: http, port: 7979}]") +
	"endpoints: [{addresses: [7.9.7.9], zone: west-1a}]\n" +
	sliceHead("service-ns", "service-name", "b", "IPv4", "[{name: http, port: 9797}]") +
	"endpoints: [{addresses: [9.7.9.7], zone: west-1b}]\n"

// TestZoneWeights mirrors TestEndpointTranslatorExperimentalZoneWeights ("Disabled",
// "Applies weights") and the zone and zone_locality labels of TestEndpointTranslator's "Sends
// metric labels with added addresses": each endpoint carries its zone, and against the
// client's zone it is local or remote (unknown without a client zone); with zone weights on,
// a local endpoint weighs ten times the default.
func TestZoneWeights(t *testing.T) {
	for _, c := range []struct {
		name    string
		weights bool
		token   string
		want    []string
	}{
		{"Disabled", false, tokenTest123, []string{"7.9.7.9:7979 w=10000 west-1a local", "9.7.9.7:9797 w=10000 west-1b remote"}},
		{"Applies weights", true, tokenTest123, []string{"7.9.7.9:7979 w=100000 west-1a local", "9.7.9.7:9797 w=10000 west-1b remote"}},
		{"No client zone", true, "ns:ns", []string{"7.9.7.9:7979 w=10000 west-1a unknown", "9.7.9.7:9797 w=10000 west-1b unknown"}},
		{"A node without a zone", true, `{"ns":"ns","nodeName":"zoneless"}`, []string{"7.9.7.9:7979 w=10000 west-1a unknown", "9.7.9.7:9797 w=10000 west-1b unknown"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Translator.ExtEndpointZoneWeights = c.weights
			e := newDirEnv(t, cfg, "")
			e.write("nodes.yaml", node("test-123", "west-1a")+"---\n"+node("zoneless", ""))
			e.write("svc.yaml", zoneWeightsFixture)
			waitService(t, e.replica, "service-ns", "service-name")
			testutil.Eventually(t, 10*time.Second, "the nodes", func() bool { return e.replica.Index().cluster.zone("test-123") != "" })
			u := e.get("service-name.service-ns.svc.cluster.local:80", c.token).next(t)
			if got := addrWeights(t, u); strings.Join(got, ",") != strings.Join(c.want, ",") {
				t.Fatalf("addresses %q, want %q", got, c.want)
			}
		})
	}
}

// topologyFixture is TestEndpointSliceTopologyAwareFilter's: node-1 in west-1a and a slice of
// name1:1 whose endpoints are hinted for west-1a (1.1.1.1) and west-1b (1.1.1.2).
var topologyFixture = lbService("ns", "name1", 1, "") + sliceHead("ns", "name1", "name1-es", "IPv4", `[{name: "", port: 1}]`) + `endpoints:
- addresses: [1.1.1.1]
  conditions: {ready: true}
  hints: {forZones: [{name: west-1a}]}
%s`

const topologySecond = `- addresses: [1.1.1.2]
  conditions: {ready: true}
  hints: {forZones: [{name: west-1b}]}
`

// TestZoneHints mirrors TestEndpointSliceTopologyAwareFilter: a client in west-1a gets the
// endpoint hinted for west-1a only, and the removal of the other endpoint sends nothing. A
// client whose zone no endpoint is hinted for gets them all.
func TestZoneHints(t *testing.T) {
	e := newDirEnv(t, DefaultConfig(), "")
	e.write("node.yaml", node("node-1", "west-1a")+"---\n"+node("node-2", "east-1a"))
	e.write("svc.yaml", fmt.Sprintf(topologyFixture, topologySecond))
	waitService(t, e.replica, "ns", "name1")
	testutil.Eventually(t, 10*time.Second, "the nodes", func() bool { return e.replica.Index().cluster.zone("node-2") != "" })
	const path = "name1.ns.svc.cluster.local:1"
	s := e.get(path, `{"ns":"ns","nodeName":"node-1"}`)
	if u := s.next(t); strings.Join(addrs(u), ",") != "1.1.1.1:1" {
		t.Fatalf("client in west-1a: %s %v", kind(u), addrs(u))
	}
	other := e.get(path, `{"ns":"ns","nodeName":"node-2"}`)
	if u := other.next(t); strings.Join(addrs(u), ",") != "1.1.1.1:1,1.1.1.2:1" {
		t.Fatalf("client in east-1a: %s %v", kind(u), addrs(u))
	}
	e.write("svc.yaml", fmt.Sprintf(topologyFixture, ""))
	if u := other.next(t); kind(u) != "remove" || strings.Join(addrs(u), ",") != "1.1.1.2:1" {
		t.Fatalf("client in east-1a after the removal: %s %v", kind(u), addrs(u))
	}
	s.quiet(t, 300*time.Millisecond)
}

// hintsFixture is TestEndpointSliceAddHints's and TestEndpointSliceRemoveHints's: name1:8989
// with one endpoint of pod name1-1, with the hints given.
var hintsFixture = lbService("ns", "name1", 8989, "") + sliceHead("ns", "name1", "name1-es", "IPv4", `[{name: "", port: 8989}]`) + `endpoints:
- addresses: [172.17.0.12]
  targetRef: {kind: Pod, name: name1-1, namespace: ns}
%s---
apiVersion: v1
kind: Pod
metadata: {name: name1-1, namespace: ns}
status:
  phase: Running
  podIP: 172.17.0.12
`

// TestZoneHintChange mirrors TestEndpointSliceAddHints and TestEndpointSliceRemoveHints: a
// hint added to an endpoint, or taken away, sends its address again.
func TestZoneHintChange(t *testing.T) {
	e := newDirEnv(t, DefaultConfig(), "")
	e.write("svc.yaml", fmt.Sprintf(hintsFixture, ""))
	waitService(t, e.replica, "ns", "name1")
	s := e.get("name1.ns.svc.cluster.local:8989", "")
	for i, hints := range []string{"", "  hints: {forZones: [{name: zone1}]}\n", "  hints: {}\n"} {
		if i > 0 {
			e.write("svc.yaml", fmt.Sprintf(hintsFixture, hints))
		}
		if u := s.next(t); kind(u) != "add" || strings.Join(addrs(u), ",") != "172.17.0.12:8989" {
			t.Fatalf("hints %q: %s %v, want the address added", hints, kind(u), addrs(u))
		}
	}
	s.quiet(t, 300*time.Millisecond)
}

// localPolicyFixture is TestEndpointSliceLocalTrafficPolicyIgnoresRemovalOfUnfilteredEndpoint's:
// name1 with internalTrafficPolicy Local, pod name1-1 on node-1 and name1-2 on node-2.
var localPolicyFixture = lbService("ns", "name1", 1, "  internalTrafficPolicy: Local\n") +
	sliceHead("ns", "name1", "name1-es", "IPv4", `[{name: "", port: 1}]`) + `endpoints:
- addresses: [1.1.1.1]
  conditions: {ready: true}
  targetRef: {kind: Pod, name: name1-1, namespace: ns}
%s---
apiVersion: v1
kind: Pod
metadata: {name: name1-1, namespace: ns}
spec: {nodeName: node-1}
status: {phase: Running, podIP: 1.1.1.1}
---
apiVersion: v1
kind: Pod
metadata: {name: name1-2, namespace: ns}
spec: {nodeName: node-2}
status: {phase: Running, podIP: 1.1.1.2}
`

const localPolicySecond = `- addresses: [1.1.1.2]
  conditions: {ready: true}
  targetRef: {kind: Pod, name: name1-2, namespace: ns}
`

// TestLocalTrafficPolicy mirrors TestEndpointSliceLocalTrafficPolicyIgnoresRemovalOfUnfilteredEndpoint:
// with internalTrafficPolicy Local a client on node-1 gets the endpoint on node-1 only, and
// the removal of the one on node-2 sends nothing; the client on node-2 gets the other.
func TestLocalTrafficPolicy(t *testing.T) {
	e := newDirEnv(t, DefaultConfig(), "")
	e.write("node.yaml", node("node-1", ""))
	e.write("svc.yaml", fmt.Sprintf(localPolicyFixture, localPolicySecond))
	waitService(t, e.replica, "ns", "name1")
	const path = "name1.ns.svc.cluster.local:1"
	s := e.get(path, `{"ns":"ns","nodeName":"node-1"}`)
	if u := s.next(t); strings.Join(addrs(u), ",") != "1.1.1.1:1" {
		t.Fatalf("client on node-1: %s %v", kind(u), addrs(u))
	}
	if u := e.get(path, `{"ns":"ns","nodeName":"node-2"}`).next(t); strings.Join(addrs(u), ",") != "1.1.1.2:1" {
		t.Fatalf("client on node-2: %s %v", kind(u), addrs(u))
	}
	e.write("svc.yaml", fmt.Sprintf(localPolicyFixture, ""))
	s.quiet(t, 300*time.Millisecond)
	// TestFilteredListenerGroupUpdateLocalTrafficPolicyUsesAvailableEndpoints: the policy
	// back to Cluster, the client on node-1 gets every endpoint.
	e.write("svc.yaml", strings.Replace(fmt.Sprintf(localPolicyFixture, localPolicySecond), "internalTrafficPolicy: Local", "internalTrafficPolicy: Cluster", 1))
	if u := s.next(t); kind(u) != "add" || strings.Join(addrs(u), ",") != "1.1.1.2:1" {
		t.Fatalf("client on node-1 with the policy Cluster: %s %v", kind(u), addrs(u))
	}
}

// familyFixture is TestEndpointSliceSelectsAddressFamilyAfterZoneFiltering's: pod name1-1
// with 1.1.1.1 and 2001:db8:85a3::8a2e:370:7333 (hinted for the zones given) and node-1 in
// west-1a.
var familyFixture = lbService("ns", "name1", 1, "") + sliceHead("ns", "name1", "name1-ipv4", "IPv4", `[{name: "", port: 1}]`) + `endpoints:
- addresses: [1.1.1.1]
  conditions: {ready: true}
  hints: {forZones: [{name: %s}]}
  targetRef: {kind: Pod, name: name1-1, namespace: ns}
` + sliceHead("ns", "name1", "name1-ipv6", "IPv6", `[{name: "", port: 1}]`) + `endpoints:
- addresses: ["2001:db8:85a3::8a2e:370:7333"]
  conditions: {ready: true}
  hints: {forZones: [{name: %s}]}
  targetRef: {kind: Pod, name: name1-1, namespace: ns}
---
apiVersion: v1
kind: Pod
metadata: {name: name1-1, namespace: ns}
status: {phase: Running, podIP: 1.1.1.1}
`

// TestAddressFamily mirrors TestEndpointSliceSelectsAddressFamilyAfterZoneFiltering: with IPv6
// on, a pod with both families is served by its IPv6 address, unless zone filtering left only
// the IPv4 one; with IPv6 off, by its IPv4 address.
func TestAddressFamily(t *testing.T) {
	for _, c := range []struct {
		name, v4Zone, v6Zone string
		ipv6                 bool
		want                 string
	}{
		{"Sends IPv6 only when pod has both IPv4 and IPv6", "west-1a", "west-1a", true, "[2001:db8:85a3::8a2e:370:7333]:1"},
		{"Sends IPv4 only when pod has both IPv4 and IPv6 but the latter in another zone", "west-1a", "west-1b", true, "1.1.1.1:1"},
		{"Sends IPv4 only with IPv6 off", "west-1a", "west-1a", false, "1.1.1.1:1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Translator.EnableIPv6 = c.ipv6
			e := newDirEnv(t, cfg, "")
			e.write("node.yaml", node("node-1", "west-1a"))
			e.write("svc.yaml", fmt.Sprintf(familyFixture, c.v4Zone, c.v6Zone))
			waitService(t, e.replica, "ns", "name1")
			testutil.Eventually(t, 10*time.Second, "the node", func() bool { return e.replica.Index().cluster.zone("node-1") != "" })
			s := e.get("name1.ns.svc.cluster.local:1", `{"ns":"ns","nodeName":"node-1"}`)
			if u := s.next(t); strings.Join(addrs(u), ",") != c.want {
				t.Fatalf("%s %v, want %s", kind(u), addrs(u), c.want)
			}
			s.quiet(t, 100*time.Millisecond)
		})
	}
}

// TestViewsShared checks what keeps per-client views cheap: the streams of clients in one
// zone share one snapshot (one set, one delta per change) whatever their nodes, and a client
// without locality shares the service's own.
func TestViewsShared(t *testing.T) {
	e := newDirEnv(t, DefaultConfig(), "")
	e.write("nodes.yaml", node("a-1", "west-1a")+"---\n"+node("a-2", "west-1a")+"---\n"+node("b-1", "west-1b"))
	e.write("svc.yaml", zoneWeightsFixture)
	waitService(t, e.replica, "service-ns", "service-name")
	testutil.Eventually(t, 10*time.Second, "the nodes", func() bool { return e.replica.Index().cluster.zone("b-1") != "" })
	const path = "service-name.service-ns.svc.cluster.local:80"
	for _, n := range []string{"a-1", "a-2", "b-1", ""} {
		e.get(path, fmt.Sprintf(`{"ns":"ns","nodeName":%q}`, n)).next(t)
	}
	k := NewServiceKey("service-ns", "service-name")
	load := func(view string) *snapshotSnapshot { return e.replica.Store().Load(viewKey(k, 80, view)) }
	if a1, a2, b1, none := load("a-1"), load("a-2"), load("b-1"), load(""); a1 == nil || a1.Set != a2.Set || a1.Set == b1.Set || a1.Set == none.Set {
		t.Fatalf("views: a-1 %p, a-2 %p, b-1 %p, none %p; want a-1 and a-2 to share theirs", a1.Set, a2.Set, b1.Set, none.Set)
	}
}
