package shard

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	pb "github.com/linkerd/linkerd2-proxy-api/go/destination"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/meridian-mesh/meridian/internal/testutil"
	"github.com/meridian-mesh/meridian/translator"
)

const auth = "web.shop.svc.cluster.local:80"

func TestGetErrors(t *testing.T) {
	e := newEnv(t, nil)
	ext := svcObj("shop", "ext")
	ext.Spec.Type = corev1.ServiceTypeExternalName
	ext.Spec.ExternalName = "example.com"
	e.h().OnService(ext, false)
	waitService(t, e.replica, "shop", "ext")
	cases := []struct {
		path string
		code codes.Code
		msg  string
	}{
		{"", codes.InvalidArgument, "empty authority"},
		{"10.0.0.1:80", codes.InvalidArgument, "IP address"},
		{"web.shop.svc.other.domain:80", codes.InvalidArgument, ""},
		{"web.shop.svc.cluster.local:99999", codes.InvalidArgument, ""},
		{"nope.shop.svc.cluster.local:80", codes.NotFound, "nope.shop not found"},
		{"ext.shop.svc.cluster.local:80", codes.InvalidArgument, "ExternalName"},
	}
	for _, c := range cases {
		t.Run(c.path, func(t *testing.T) {
			s, _ := get(t, e, c.path)
			testutil.WantStatus(t, s.end(t), c.code, c.msg)
		})
	}
}

func waitService(t *testing.T, r *Replica, ns, name string) {
	t.Helper()
	k := NewServiceKey(ns, name)
	testutil.Eventually(t, 5*time.Second, "service "+k.String()+" indexed and translated", func() bool { return translated(r.Index(), k) })
}

// translated reports whether the index holds the Service k and each of its ports' sets is
// what its current inputs translate to. The source's objects are indexed one by one and
// translated after: a stream opened between a Service and its last slice starts with fewer
// endpoints.
func translated(x *Index, k ServiceKey) bool {
	s, ok := x.services.Load(k)
	if !ok {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.svc == nil {
		return false
	}
	in := x.inputsLocked(k, s)
	for _, p := range s.svc.Spec.Ports {
		ps := s.ports[uint32(p.Port)]
		if ps == nil || !translator.AddressSetReusing(x.cfg.Translator, in, uint32(p.Port), translator.Reuse{}).Equal(ps.base) {
			return false
		}
	}
	return true
}

func TestGetEmptyServiceNoEndpointsAtOnce(t *testing.T) {
	e := newEnv(t, nil)
	e.h().OnService(svcObj("shop", "web"), false)
	waitService(t, e.replica, "shop", "web")
	s, _ := get(t, e, auth)
	if u := s.next(t); kind(u) != "no_endpoints(exists=true)" {
		t.Fatalf("first update %s, want no_endpoints(exists=true)", kind(u))
	}
}

func TestGetLifecycle(t *testing.T) {
	e := newEnv(t, nil)
	h := e.h()
	h.OnService(svcObj("shop", "web"), false)
	for i := 1; i <= 3; i++ {
		h.OnPod(podObj("shop", fmt.Sprintf("web-%d", i), fmt.Sprintf("10.0.0.%d", i), false), false)
	}
	h.OnPod(podObj("shop", "web-9", "10.0.1.9", false), false)
	h.OnEndpointSlice(sliceObj("shop", "web", "web-a", 8080,
		epSpec{"10.0.0.1", "web-1", true, ""}, epSpec{"10.0.0.2", "web-2", true, ""}, epSpec{"10.0.0.3", "web-3", false, ""}), false)
	h.OnEndpointSlice(sliceObj("shop", "web", "web-b", 8080, epSpec{"10.0.1.9", "web-9", true, ""}), false)
	waitService(t, e.replica, "shop", "web")

	s, _ := get(t, e, auth)
	var v held
	u := s.next(t)
	v.apply(t, u)
	if kind(u) != "add" || strings.Join(addrs(u), ",") != "10.0.0.1:8080,10.0.0.2:8080,10.0.1.9:8080" {
		t.Fatalf("initial update %s %v", kind(u), addrs(u))
	}
	add := u.GetAdd()
	if add.GetMetricLabels()["service"] != "web" || add.GetMetricLabels()["namespace"] != "shop" {
		t.Fatalf("set labels %v", add.GetMetricLabels())
	}
	if a := add.GetAddrs()[0]; a.GetWeight() != 10000 || a.GetMetricLabels()["pod"] != "web-1" || a.GetTlsIdentity() != nil {
		t.Fatalf("unmeshed address %v", a)
	}

	// Endpoint becomes not ready -> Remove of it.
	h.OnEndpointSlice(sliceObj("shop", "web", "web-a", 8080,
		epSpec{"10.0.0.1", "web-1", true, ""}, epSpec{"10.0.0.2", "web-2", false, ""}, epSpec{"10.0.0.3", "web-3", false, ""}), false)
	u = s.next(t)
	v.apply(t, u)
	if kind(u) != "remove" || strings.Join(addrs(u), ",") != "10.0.0.2:8080" {
		t.Fatalf("not-ready: got %s %v", kind(u), addrs(u))
	}

	// Pod relabelled meshed -> Add with identity.
	h.OnPod(podObj("shop", "web-1", "10.0.0.1", true), false)
	u = s.next(t)
	v.apply(t, u)
	if kind(u) != "add" || len(u.GetAdd().GetAddrs()) != 1 {
		t.Fatalf("meshed: got %s %v", kind(u), addrs(u))
	}
	a := u.GetAdd().GetAddrs()[0]
	wantID := "web.shop.serviceaccount.identity.linkerd.cluster.local"
	if a.GetTlsIdentity().GetDnsLikeIdentity().GetName() != wantID || a.GetTlsIdentity().GetServerName().GetName() != wantID {
		t.Fatalf("identity %v", a.GetTlsIdentity())
	}
	if a.GetProtocolHint().GetH2() == nil || a.GetHttp2() == nil || a.GetMetricLabels()["control_plane_ns"] != "linkerd" {
		t.Fatalf("meshed address %v", a)
	}

	// Slice deleted -> Remove of only its addresses.
	h.OnEndpointSlice(sliceObj("shop", "web", "web-b", 8080), true)
	u = s.next(t)
	v.apply(t, u)
	if kind(u) != "remove" || strings.Join(addrs(u), ",") != "10.0.1.9:8080" {
		t.Fatalf("slice delete: got %s %v", kind(u), addrs(u))
	}
	// An unrelated pod change sends nothing.
	h.OnPod(podObj("shop", "unrelated", "10.9.9.9", true), false)
	s.quiet(t, 200*time.Millisecond)

	// The last endpoint goes -> NoEndpoints{exists:true}.
	h.OnEndpointSlice(sliceObj("shop", "web", "web-a", 8080, epSpec{"10.0.0.1", "web-1", false, ""}), false)
	u = s.next(t)
	v.apply(t, u)
	if kind(u) != "no_endpoints(exists=true)" {
		t.Fatalf("last endpoint gone: got %s", kind(u))
	}
	// Service deleted -> NoEndpoints{exists:false}; the stream stays open.
	h.OnService(svcObj("shop", "web"), true)
	u = s.next(t)
	if kind(u) != "no_endpoints(exists=false)" {
		t.Fatalf("service deleted: got %s", kind(u))
	}
	// Back again with an endpoint -> Add.
	h.OnService(svcObj("shop", "web"), false)
	h.OnEndpointSlice(sliceObj("shop", "web", "web-a", 8080, epSpec{"10.0.0.1", "web-1", true, ""}), false)
	deadline := time.Now().Add(10 * time.Second)
	for {
		u = s.next(t)
		v.apply(t, u)
		if kind(u) == "add" || time.Now().After(deadline) {
			break
		}
	}
	if strings.Join(v.keys(), ",") != "10.0.0.1:8080" {
		t.Fatalf("after re-create client holds %v", v.keys())
	}
}

func TestGetNamedTargetPortIPv6AndHostname(t *testing.T) {
	e := newEnv(t, nil)
	h := e.h()
	h.OnService(svcObj("shop", "db", corev1.ServicePort{Name: "http", Port: 80, TargetPort: intstr.FromString("web")}), false)
	h.OnPod(podObj("shop", "db-0", "fd00::10", true), false)
	h.OnPod(podObj("shop", "db-1", "fd00::11", true), false)
	h.OnEndpointSlice(sliceObj("shop", "db", "db-v6", 9090,
		epSpec{"fd00::10", "db-0", true, "db-0"}, epSpec{"fd00::11", "db-1", true, "db-1"}), false)
	waitService(t, e.replica, "shop", "db")
	s, _ := get(t, e, "db.shop.svc.cluster.local")
	u := s.next(t)
	if strings.Join(addrs(u), ",") != "[fd00::10]:9090,[fd00::11]:9090" {
		t.Fatalf("v6 named port: %v", addrs(u))
	}
	hs, _ := get(t, e, "db-1.db.shop.svc.cluster.local:80")
	u = hs.next(t)
	if kind(u) != "add" || strings.Join(addrs(u), ",") != "[fd00::11]:9090" {
		t.Fatalf("hostname stream: %s %v", kind(u), addrs(u))
	}
	h.OnEndpointSlice(sliceObj("shop", "db", "db-v6", 9090, epSpec{"fd00::10", "db-0", true, "db-0"}), false)
	u = hs.next(t)
	if kind(u) != "no_endpoints(exists=true)" {
		t.Fatalf("hostname stream after its pod left: %s", kind(u))
	}
}

func TestGetProfile(t *testing.T) {
	e := newEnv(t, nil)
	h := e.h()
	h.OnService(svcObj("shop", "web", corev1.ServicePort{Name: "http", Port: 80}, corev1.ServicePort{Name: "pg", Port: 5432}), false)
	waitService(t, e.replica, "shop", "web")
	for _, c := range []struct {
		path   string
		opaque bool
	}{{"web.shop.svc.cluster.local:80", false}, {"web.shop.svc.cluster.local:5432", true}} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		s, err := e.client.GetProfile(ctx, &pb.GetDestination{Path: c.path})
		if err != nil {
			t.Fatal(err)
		}
		p, err := s.Recv()
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if p.GetFullyQualifiedName() != "web.shop.svc.cluster.local" || p.GetOpaqueProtocol() != c.opaque {
			t.Fatalf("%s: profile %v", c.path, p)
		}
		rb := p.GetRetryBudget()
		if rb.GetRetryRatio() != 0.2 || rb.GetMinRetriesPerSecond() != 10 || rb.GetTtl().AsDuration() != 10*time.Second {
			t.Fatalf("retry budget %v", rb)
		}
	}
	// A port the Service does not declare gets the empty profile (Linkerd's svcDefinesPort);
	// an authority that is neither a Service nor an IP address is InvalidArgument (IP
	// addresses are looked up: parity_test.go).
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, _ := e.client.GetProfile(ctx, &pb.GetDestination{Path: "web.shop.svc.cluster.local:7777"})
	if p, err := s.Recv(); err != nil || !proto.Equal(p, &pb.DestinationProfile{}) {
		t.Fatalf("profile of an undeclared port: %v, %v; want the empty profile", p, err)
	}
	// An address the cluster does not know gets the default profile, opaque on the default
	// opaque ports (Linkerd's defaults, translator.DefaultConfig's), with the address as its
	// endpoint: TestGetProfiles' "Return profile with opaque protocol when using an opaque
	// port with an external IP" and "Return default profile when IP does not map to service
	// or pod" (linkerd2's controller/api/destination/server_test.go), over this list.
	for _, port := range []uint32{25, 587, 3306, 4444, 5432, 6379, 9300, 11211, 80, 443, 8080} {
		opaque := port != 80 && port != 443 && port != 8080
		s, _ := e.client.GetProfile(ctx, &pb.GetDestination{Path: fmt.Sprintf("192.0.2.7:%d", port)})
		p, err := s.Recv()
		if err != nil || p.GetOpaqueProtocol() != opaque || p.GetEndpoint().GetAddr().GetPort() != port || p.GetRetryBudget() == nil {
			t.Fatalf("profile of 192.0.2.7:%d: %v, %v; want the default profile, opaque %v", port, p, err, opaque)
		}
	}
	for _, path := range []string{"linkerd.io", "web.shop.svc.cluster.local:99999", "[fe80::1%eth0]:80"} {
		s, _ := e.client.GetProfile(ctx, &pb.GetDestination{Path: path})
		if _, err := s.Recv(); status.Code(err) != codes.InvalidArgument {
			t.Fatalf("profile of %q: %v, want InvalidArgument", path, err)
		}
	}
}

// TestGetTransportHeaderMode: in the transport-header mode a meshed endpoint's protocol hint
// keeps h2 and gains opaque_transport at the proxy's inbound port (what Linkerd's destination
// sends with --outbound-transport-mode=transport-header); an unmeshed one gets no hint. The
// same holds for the endpoint of a pod IP's profile.
func TestGetTransportHeaderMode(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.Translator.OutboundTransportMode = translator.TransportHeader })
	h := e.h()
	h.OnService(svcObj("shop", "web"), false)
	h.OnPod(podObjIn("shop", "web-1", "10.0.0.1", true, corev1.PodRunning), false)
	h.OnPod(podObjIn("shop", "web-2", "10.0.0.2", false, corev1.PodRunning), false)
	h.OnEndpointSlice(sliceObj("shop", "web", "web-a", 8080, epSpec{"10.0.0.1", "web-1", true, ""}, epSpec{"10.0.0.2", "web-2", true, ""}), false)
	waitService(t, e.replica, "shop", "web")
	s, _ := get(t, e, auth)
	var meshed, plain *pb.WeightedAddr
	testutil.Eventually(t, 5*time.Second, "both endpoints", func() bool {
		u := s.next(t)
		for _, a := range u.GetAdd().GetAddrs() {
			if a.GetTlsIdentity() != nil {
				meshed = a
			} else {
				plain = a
			}
		}
		return meshed != nil && plain != nil
	})
	if meshed.GetProtocolHint().GetH2() == nil || meshed.GetProtocolHint().GetOpaqueTransport().GetInboundPort() != 4143 {
		t.Errorf("meshed endpoint hint = %v, want h2 with opaque_transport 4143", meshed.GetProtocolHint())
	}
	if plain.GetProtocolHint() != nil {
		t.Errorf("unmeshed endpoint hint = %v, want none", plain.GetProtocolHint())
	}
	// A pod IP's profile carries the pod's endpoint with the same hint (Linkerd's endpoint
	// profile translator applies the mode there too: forceOpaqueTransport).
	for _, c := range []struct {
		path      string
		transport uint32
	}{{"10.0.0.1:8080", 4143}, {"10.0.0.2:8080", 0}} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		ps, err := e.client.GetProfile(ctx, &pb.GetDestination{Path: c.path})
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		p, err := ps.Recv()
		cancel()
		hint := p.GetEndpoint().GetProtocolHint()
		if err != nil || p.GetEndpoint() == nil || hint.GetOpaqueTransport().GetInboundPort() != c.transport ||
			(c.transport != 0 && hint.GetH2() == nil) {
			t.Errorf("profile of %s: %v, %v; want its endpoint with opaque_transport %d", c.path, p, err, c.transport)
		}
	}
}
