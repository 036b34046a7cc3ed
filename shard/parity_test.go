package shard

import (
	"fmt"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	pb "github.com/linkerd/linkerd2-proxy-api/go/destination"
	"google.golang.org/grpc/codes"

	"github.com/meridian-mesh/meridian/internal/testutil"
	"github.com/meridian-mesh/meridian/internal/wire"
)

// The tests of this file ask Meridian what linkerd2's destination server tests
// (controller/api/destination/server_test.go, TestGet and TestGetProfiles) ask Linkerd, of
// the same cluster (testdata/linkerd: the objects of its test_util.go fixture), and check the
// same answers. Each subtest names the Linkerd subtest it mirrors.

// parityConfig is the configuration of Linkerd's test server (getServerWithClient).
func parityConfig() Config {
	cfg := DefaultConfig()
	cfg.Translator.ClusterDomain = "mycluster.local"
	cfg.Translator.TrustDomain = "trust.domain"
	cfg.Translator.DefaultOpaquePorts = []uint32{25, 443, 587, 3306, 5432, 11211}
	cfg.Translator.EnableIPv6 = true
	return cfg
}

// The fixture's names and addresses (server_test.go's constants).
const (
	l5dFQN            = "name1.ns.svc.mycluster.local"
	l5dFQNDual        = "name-ds.ns.svc.mycluster.local"
	l5dFQNOpaque      = "name3.ns.svc.mycluster.local"
	l5dFQNOpaqueSvc   = "name4.ns.svc.mycluster.local"
	l5dFQNSkipped     = "name5.ns.svc.mycluster.local"
	l5dPodDNS         = "pod-0.statefulset-svc.ns.svc.mycluster.local"
	l5dClusterIP      = "172.17.12.0"
	l5dClusterIPv6    = "2001:db8::88"
	l5dClusterIPOpq   = "172.17.12.1"
	l5dPodIP1         = "172.17.0.12"
	l5dPodIPv6Dual    = "2001:db8::94"
	l5dPodIP2         = "172.17.0.13"
	l5dPodIP3         = "172.17.0.20"
	l5dPodIP4         = "172.17.0.21"
	l5dPodIPOpaque    = "172.17.0.14"
	l5dPodIPSkipped   = "172.17.0.15"
	l5dPodIPPolicy    = "172.17.0.16"
	l5dPodIPStateful  = "172.17.13.15"
	l5dExternalIP     = "192.168.1.20"
	l5dPort           = 8989
	l5dAdminPort      = 4191
	l5dOpaquePort     = 4242
	l5dSkippedPort    = 24224
	l5dIdentitySuffix = ".ns.serviceaccount.identity.linkerd.trust.domain"
)

func hostPort(host string, port int) string {
	if netip.MustParseAddr(host).Is6() {
		return fmt.Sprintf("[%s]:%d", host, port)
	}
	return fmt.Sprintf("%s:%d", host, port)
}

// endpointAddr is a profile endpoint's address as "ip:port".
func endpointAddr(t *testing.T, p *pb.DestinationProfile) string {
	t.Helper()
	if p.GetEndpoint() == nil {
		t.Fatalf("profile without an endpoint: %v", p)
	}
	ap, err := wire.ToAddrPort(p.GetEndpoint().GetAddr())
	if err != nil {
		t.Fatal(err)
	}
	return ap.String()
}

// TestParityGetProfile mirrors TestGetProfiles.
func TestParityGetProfile(t *testing.T) {
	e := newDirEnv(t, parityConfig(), "linkerd")

	t.Run("Returns error if not valid service name", func(t *testing.T) {
		err := e.profile("linkerd.io", "").end(t)
		testutil.WantStatus(t, err, codes.InvalidArgument, "")
	})
	t.Run("Returns InvalidArgument for ExternalName service", func(t *testing.T) {
		err := e.profile("externalname.ns.svc.mycluster.local", "").end(t)
		testutil.WantStatus(t, err, codes.InvalidArgument, "ExternalName")
	})
	t.Run("Returns server profile", func(t *testing.T) {
		p := e.profile(fmt.Sprintf("%s:%d", l5dFQN, l5dPort), "ns:other").next(t)
		checkRoutes(t, p, l5dFQN, "route1", false)
	})
	t.Run("Return service profile when using json token", func(t *testing.T) {
		p := e.profile(fmt.Sprintf("%s:%d", l5dFQN, l5dPort), `{"ns":"other"}`).next(t)
		checkRoutes(t, p, l5dFQN, "route1", false)
	})
	t.Run("Returns client profile", func(t *testing.T) {
		p := e.profile(fmt.Sprintf("%s:%d", l5dFQN, l5dPort), `{"ns":"client-ns"}`).next(t)
		checkRoutes(t, p, l5dFQN, "route2", true)
		if r := p.GetProfileRef().GetResource(); r.GetNamespace() != "client-ns" || r.GetName() != l5dFQN || r.GetKind() != "ServiceProfile" {
			t.Fatalf("profile reference %v", p.GetProfileRef())
		}
	})
	t.Run("Return profile when using cluster IP", func(t *testing.T) {
		p := e.profile(hostPort(l5dClusterIP, l5dPort), "").next(t)
		checkRoutes(t, p, l5dFQN, "route1", false)
		if r := p.GetParentRef().GetResource(); r.GetName() != "name1" || r.GetNamespace() != "ns" || r.GetPort() != l5dPort {
			t.Fatalf("parent %v", p.GetParentRef())
		}
	})
	t.Run("Return profile when using secondary cluster IP", func(t *testing.T) {
		p := e.profile(hostPort(l5dClusterIPv6, l5dPort), "").next(t)
		checkRoutes(t, p, l5dFQNDual, "route1", false)
	})
	t.Run("Return profile with endpoint when using pod DNS", func(t *testing.T) {
		p := e.profile(fmt.Sprintf("%s:%d", l5dPodDNS, l5dPort), "ns:ns").next(t)
		checkPodEndpoint(t, p, hostPort(l5dPodIPStateful, l5dPort))
	})
	t.Run("Return profile with endpoint when using pod IP", func(t *testing.T) {
		p := e.profile(hostPort(l5dPodIP1, l5dPort), "ns:ns").next(t)
		checkPodEndpoint(t, p, hostPort(l5dPodIP1, l5dPort))
		if p.GetEndpoint().GetHttp2() == nil || p.GetEndpoint().GetTlsIdentity().GetDnsLikeIdentity().GetName() != "default"+l5dIdentitySuffix {
			t.Fatalf("meshed pod endpoint %v", p.GetEndpoint())
		}
	})
	t.Run("Return profile with endpoint when using pod secondary IP", func(t *testing.T) {
		p := e.profile(hostPort(l5dPodIPv6Dual, l5dPort), "ns:ns").next(t)
		checkPodEndpoint(t, p, hostPort(l5dPodIPv6Dual, l5dPort))
	})
	t.Run("Return default profile when IP does not map to service or pod", func(t *testing.T) {
		p := e.profile("172.0.0.0:1234", "").next(t)
		if p.GetRetryBudget() == nil || p.GetOpaqueProtocol() || endpointAddr(t, p) != "172.0.0.0:1234" || p.GetEndpoint().GetTlsIdentity() != nil {
			t.Fatalf("default profile %v", p)
		}
	})
	t.Run("Return profile with no opaque transport when pod does not have label and port is opaque", func(t *testing.T) {
		p := e.profile(hostPort(l5dPodIP2, 3306), "").next(t)
		if endpointAddr(t, p) != hostPort(l5dPodIP2, 3306) || p.GetEndpoint().GetProtocolHint().GetOpaqueTransport() != nil || p.GetEndpoint().GetHttp2() != nil {
			t.Fatalf("unmeshed pod on an opaque port: %v", p)
		}
		// The one running pod of the four that claim the address.
		if pod := p.GetEndpoint().GetMetricLabels()["pod"]; pod != "name2" {
			t.Fatalf("endpoint of pod %q, want name2", pod)
		}
	})
	t.Run("Return profile with no protocol hint when pod does not have label", func(t *testing.T) {
		p := e.profile(hostPort(l5dPodIP2, l5dPort), "").next(t)
		if p.GetEndpoint() == nil || p.GetEndpoint().GetProtocolHint() != nil {
			t.Fatalf("unmeshed pod: %v", p)
		}
	})
	t.Run("Return profile with protocol hint for default opaque port when pod is unmeshed", func(t *testing.T) {
		p := e.profile(hostPort(l5dPodIP2, 3306), "").next(t)
		if p.GetEndpoint() == nil || !p.GetOpaqueProtocol() || p.GetEndpoint().GetProtocolHint() != nil {
			t.Fatalf("unmeshed pod on the default opaque port: %v", p)
		}
	})
	t.Run("Return non-opaque protocol profile when using cluster IP and opaque protocol port", func(t *testing.T) {
		p := e.profile(hostPort(l5dClusterIPOpq, l5dOpaquePort), "").next(t)
		if p.GetFullyQualifiedName() != l5dFQNOpaque || p.GetOpaqueProtocol() {
			t.Fatalf("profile %v, want %s, not opaque", p, l5dFQNOpaque)
		}
	})
	t.Run("Return opaque protocol profile with endpoint when using pod IP and opaque protocol port", func(t *testing.T) {
		p := e.profile(hostPort(l5dPodIPOpaque, l5dOpaquePort), "").next(t)
		checkOpaqueEndpoint(t, p, hostPort(l5dPodIPOpaque, l5dOpaquePort))
	})
	t.Run("Return opaque protocol profile when using service name with opaque port annotation", func(t *testing.T) {
		p := e.profile(fmt.Sprintf("%s:%d", l5dFQNOpaqueSvc, l5dOpaquePort), "").next(t)
		if p.GetFullyQualifiedName() != l5dFQNOpaqueSvc || !p.GetOpaqueProtocol() {
			t.Fatalf("profile %v, want %s, opaque", p, l5dFQNOpaqueSvc)
		}
	})
	t.Run("Return profile with unknown protocol hint and identity when pod contains skipped inbound port", func(t *testing.T) {
		p := e.profile(hostPort(l5dPodIPSkipped, l5dSkippedPort), "").next(t)
		if p.GetEndpoint() == nil || p.GetEndpoint().GetProtocolHint() != nil || p.GetEndpoint().GetTlsIdentity() != nil {
			t.Fatalf("skipped inbound port: %v", p)
		}
	})
	t.Run("Return profile with opaque protocol when using Pod IP selected by a Server", func(t *testing.T) {
		p := e.profile(hostPort(l5dPodIPPolicy, 80), "").next(t)
		checkOpaqueEndpoint(t, p, hostPort(l5dPodIPPolicy, 80))
	})
	t.Run("Return profile with opaque protocol when using an opaque port with an external IP", func(t *testing.T) {
		if p := e.profile(hostPort(l5dExternalIP, 3306), "").next(t); !p.GetOpaqueProtocol() {
			t.Fatalf("external IP on an opaque port: %v", p)
		}
	})
	t.Run("Return profile with non-opaque protocol when using an arbitrary port with an external IP", func(t *testing.T) {
		if p := e.profile(hostPort(l5dExternalIP, 80), "").next(t); p.GetOpaqueProtocol() {
			t.Fatalf("external IP on port 80: %v", p)
		}
	})
}

// checkRoutes checks a service's profile: its name, not opaque, and one route, named route.
func checkRoutes(t *testing.T, p *pb.DestinationProfile, fqn, route string, retryable bool) {
	t.Helper()
	if p.GetFullyQualifiedName() != fqn || p.GetOpaqueProtocol() {
		t.Fatalf("profile %v, want %s, not opaque", p, fqn)
	}
	if r := p.GetRoutes(); len(r) != 1 || r[0].GetMetricsLabels()["route"] != route || r[0].GetIsRetryable() != retryable {
		t.Fatalf("routes %v, want one, %s (retryable: %v)", r, route, retryable)
	}
}

// checkPodEndpoint checks a profile of a meshed pod's address on a port that is not opaque:
// the endpoint at addr with the namespace label and a protocol hint without opaque transport.
func checkPodEndpoint(t *testing.T, p *pb.DestinationProfile, addr string) {
	t.Helper()
	if got := endpointAddr(t, p); got != addr {
		t.Fatalf("endpoint %s, want %s", got, addr)
	}
	ep := p.GetEndpoint()
	if p.GetOpaqueProtocol() || ep.GetMetricLabels()["namespace"] != "ns" || ep.GetProtocolHint() == nil || ep.GetProtocolHint().GetOpaqueTransport() != nil {
		t.Fatalf("pod endpoint profile %v", p)
	}
}

// checkOpaqueEndpoint checks a profile of a meshed pod's opaque port: opaque, the endpoint at
// addr with the namespace label and opaque transport to the proxy's inbound port.
func checkOpaqueEndpoint(t *testing.T, p *pb.DestinationProfile, addr string) {
	t.Helper()
	if got := endpointAddr(t, p); got != addr {
		t.Fatalf("endpoint %s, want %s", got, addr)
	}
	ep := p.GetEndpoint()
	if !p.GetOpaqueProtocol() || ep.GetMetricLabels()["namespace"] != "ns" || ep.GetProtocolHint().GetOpaqueTransport().GetInboundPort() != 4143 {
		t.Fatalf("opaque pod endpoint profile %v", p)
	}
}

// TestParityProfileFollowsPod mirrors TestGetProfiles' "Profile gets updated after pod
// becomes ready" and its native-sidecar twin: a pending pod's address is served bare, and
// with its identity once the pod runs.
func TestParityProfileFollowsPod(t *testing.T) {
	e := newDirEnv(t, parityConfig(), "linkerd")
	for _, c := range []struct{ ip, pod string }{{l5dPodIP3, "name1-20"}, {l5dPodIP4, "name1-21"}} {
		s := e.profile(hostPort(c.ip, l5dAdminPort), "ns:ns")
		if p := s.next(t); p.GetEndpoint() == nil || p.GetEndpoint().GetTlsIdentity() != nil {
			t.Fatalf("%s pending: %v, want an endpoint without identity", c.pod, p)
		}
		e.write("running-"+c.pod+".yaml", fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s, namespace: ns, labels: {linkerd.io/control-plane-ns: linkerd}}
spec:
  containers:
  - name: linkerd-proxy
    ports: [{containerPort: 4191}]
status:
  phase: Running
  podIP: %s
  podIPs: [{ip: %s}]
`, c.pod, c.ip, c.ip))
		// The pod is now defined twice (the first file, meshed.yaml, wins); remove it there.
		removePod(t, e, c.pod)
		p := s.next(t)
		for p.GetEndpoint().GetTlsIdentity() == nil {
			p = s.next(t)
		}
		if id := p.GetEndpoint().GetTlsIdentity().GetDnsLikeIdentity().GetName(); id != "default"+l5dIdentitySuffix {
			t.Fatalf("%s running: identity %q", c.pod, id)
		}
	}
}

// removePod rewrites meshed.yaml without the document of pod name.
func removePod(t *testing.T, e *dirEnv, name string) {
	t.Helper()
	docs := strings.Split(readFile(t, e.dir+"/meshed.yaml"), "\n---\n")
	kept := docs[:0]
	for _, d := range docs {
		if !strings.Contains(d, "kind: Pod") || !strings.Contains(d, "name: "+name+"\n") {
			kept = append(kept, d)
		}
	}
	e.write("meshed.yaml", strings.Join(kept, "\n---\n"))
}

// TestParityGet mirrors TestGet's endpoint cases.
func TestParityGet(t *testing.T) {
	e := newDirEnv(t, parityConfig(), "linkerd")
	t.Run("Returns error if not valid service name", func(t *testing.T) {
		testutil.WantStatus(t, e.get("linkerd.io", "").end(t), codes.InvalidArgument, "")
	})
	t.Run("Returns InvalidArgument for ExternalName service", func(t *testing.T) {
		testutil.WantStatus(t, e.get("externalname.ns.svc.mycluster.local", "").end(t), codes.InvalidArgument, "ExternalName")
	})
	for _, c := range []struct{ name, fqn, ip string }{
		{"Returns endpoints (IPv4)", l5dFQN, l5dPodIP1},
		{"Returns endpoints (IPv6)", "name-ipv6.ns.svc.mycluster.local", "2001:db8::68"},
		{"Returns endpoints (dual-stack)", l5dFQNDual, l5dPodIPv6Dual},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := e.get(fmt.Sprintf("%s:%d", c.fqn, l5dPort), "")
			u := s.next(t)
			if got := strings.Join(addrs(u), ","); got != hostPort(c.ip, l5dPort) {
				t.Fatalf("first update %s %s, want only %s", kind(u), got, hostPort(c.ip, l5dPort))
			}
			s.quiet(t, 100*time.Millisecond)
		})
	}
	t.Run("Sets meshed HTTP/2 client params", func(t *testing.T) {
		u := e.get(fmt.Sprintf("%s:%d", l5dFQN, l5dPort), "").next(t)
		if a := u.GetAdd().GetAddrs(); len(a) != 1 || a[0].GetHttp2() == nil {
			t.Fatalf("meshed endpoint %v", u)
		}
	})
	t.Run("Does not set unmeshed HTTP/2 client params", func(t *testing.T) {
		// name2's slices name the unmeshed name2-2 (terminated, but known); with IPv6 on,
		// its IPv6 address is the one served.
		u := e.get(fmt.Sprintf("name2.ns.svc.mycluster.local:%d", l5dPort), "").next(t)
		a := u.GetAdd().GetAddrs()
		if len(a) != 1 || a[0].GetHttp2() != nil || a[0].GetTlsIdentity() != nil {
			t.Fatalf("unmeshed endpoints %v, want one without HTTP/2 parameters", u)
		}
	})
	t.Run("Return endpoint with unknown protocol hint and identity when service name contains skipped inbound port", func(t *testing.T) {
		u := e.get(fmt.Sprintf("%s:%d", l5dFQNSkipped, l5dSkippedPort), "").next(t)
		a := u.GetAdd().GetAddrs()
		if len(a) == 0 || a[0].GetProtocolHint() != nil || a[0].GetTlsIdentity() != nil {
			t.Fatalf("skipped inbound port: %v", u)
		}
	})
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
