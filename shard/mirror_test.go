package shard

import (
	"fmt"
	"testing"

	pb "github.com/linkerd/linkerd2-proxy-api/go/destination"

	"github.com/meridian-mesh/meridian/internal/wire"
)

// mirrorFixture is the mirror service of linkerd2's TestEndpointsWatcherServiceMirrors
// (watcher/endpoints_watcher_test.go, its EndpointSlice case): name1-remote in ns, whose slice
// the service mirror annotates with the gateway's identity and the remote service's name;
// the annotations, the endpoint port and the cluster label are given.
func mirrorFixture(annotations string, port int, labels string) string {
	return lbService("ns", "name1-remote", 8989, "") + fmt.Sprintf(`---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: name1-remote-xxxx
  namespace: ns
  annotations: {%s}
  labels: {mirror.linkerd.io/mirrored-service: "true", kubernetes.io/service-name: name1-remote%s}
addressType: IPv4
endpoints:
- addresses: [172.17.0.12]
ports:
- port: %d
`, annotations, labels, port)
}

// gateway renders an Add's one address as Linkerd's test does: "addr/identity/authority"
// (the parts that are set), and whether it has the h2 hint and HTTP/2 parameters.
func gateway(t *testing.T, u *pb.Update) (string, bool) {
	t.Helper()
	a := u.GetAdd().GetAddrs()
	if len(a) != 1 {
		t.Fatalf("update %s %v, want one address added", kind(u), addrs(u))
	}
	ap, err := wire.ToAddrPort(a[0].GetAddr())
	if err != nil {
		t.Fatal(err)
	}
	s := ap.String()
	if id := a[0].GetTlsIdentity().GetDnsLikeIdentity().GetName(); id != "" {
		s += "/" + id
	}
	if o := a[0].GetAuthorityOverride().GetAuthorityOverride(); o != "" {
		s += "/" + o
	}
	return s, a[0].GetProtocolHint().GetH2() != nil && a[0].GetHttp2() != nil
}

// TestMirrorGateway mirrors TestEndpointsWatcherServiceMirrors and
// TestEndpointTranslatorForRemoteGateways ("Sends TlsIdentity when enabled", "Sends TlsIdentity
// and Auth override when present", "Does not send TlsIdentity when not present"): a mirror's
// endpoint carries the gateway's identity (with the h2 hint) and the remote service's
// authority at the port asked for; a change of the identity sends the endpoint again.
func TestMirrorGateway(t *testing.T) {
	const id, fq = `mirror.linkerd.io/remote-gateway-identity: "gateway-identity-1"`, `mirror.linkerd.io/remote-svc-fq-name: "name1-remote-fq"`
	for _, c := range []struct {
		name, annotations string
		port              int
		want              string
		h2                bool
	}{
		{"mirrored service with identity and endpoint slices", id + ", " + fq, 8989, "172.17.0.12:8989/gateway-identity-1/name1-remote-fq:8989", true},
		{"mirrored service without identity", fq, 8989, "172.17.0.12:8989/name1-remote-fq:8989", false},
		{"mirrored service with remapped port in endpoints", id + ", " + fq, 9999, "172.17.0.12:9999/gateway-identity-1/name1-remote-fq:8989", true},
		{"mirrored service with empty identity and remapped port in endpoints", `mirror.linkerd.io/remote-gateway-identity: "", ` + fq, 9999, "172.17.0.12:9999/name1-remote-fq:8989", false},
		{"not a mirror", "", 8989, "172.17.0.12:8989", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newDirEnv(t, DefaultConfig(), "")
			e.write("svc.yaml", mirrorFixture(c.annotations, c.port, ""))
			waitService(t, e.replica, "ns", "name1-remote")
			got, h2 := gateway(t, e.get("name1-remote.ns.svc.cluster.local:8989", "").next(t))
			if got != c.want || h2 != c.h2 {
				t.Fatalf("endpoint %s (h2 %v), want %s (h2 %v)", got, h2, c.want, c.h2)
			}
		})
	}
	// The target labels of Linkerd's metricLabels (port_publisher.go), and an identity change.
	t.Run("a new gateway identity is sent", func(t *testing.T) {
		const fqRemote = `mirror.linkerd.io/remote-svc-fq-name: "name1.remote-ns.svc.cluster.local"`
		e := newDirEnv(t, DefaultConfig(), "")
		e.write("svc.yaml", mirrorFixture(id+", "+fqRemote, 8989, ", mirror.linkerd.io/cluster-name: east"))
		waitService(t, e.replica, "ns", "name1-remote")
		s := e.get("name1-remote.ns.svc.cluster.local:8989", "")
		u := s.next(t)
		if l := u.GetAdd().GetMetricLabels(); l["target_cluster"] != "east" || l["target_service"] != "name1" || l["target_service_namespace"] != "remote-ns" {
			t.Fatalf("set labels %v, want the target cluster, service and namespace", l)
		}
		e.write("svc.yaml", mirrorFixture(`mirror.linkerd.io/remote-gateway-identity: "gateway-identity-2", `+fqRemote, 8989, ", mirror.linkerd.io/cluster-name: east"))
		if got, _ := gateway(t, s.next(t)); got != "172.17.0.12:8989/gateway-identity-2/name1.remote-ns.svc.cluster.local:8989" {
			t.Fatalf("after the identity changed: %s", got)
		}
	})
}
