package translator

import (
	"reflect"
	"slices"
	"testing"

	"github.com/meridian-mesh/meridian/snapshot"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

const (
	v4   = discoveryv1.AddressTypeIPv4
	v6   = discoveryv1.AddressTypeIPv6
	fqdn = discoveryv1.AddressTypeFQDN
	idA  = "sa-a.ns.serviceaccount.identity.linkerd.cluster.local"
)

// addressSetCase is a case of TestAddressSet: the endpoints (as renderSet prints them) that
// HostAddressSet makes of a service port and host from slices and pods.
type addressSetCase struct {
	name   string
	svc    *corev1.Service
	port   uint32
	host   string
	slices []*discoveryv1.EndpointSlice
	pods   podIndex
	want   []string
}

// The service, ports and pods most addressSetCases share.
var (
	asWeb   = service("ns", "web", sport("http", 80), sport("db", 3306))
	asPorts = []discoveryv1.EndpointPort{eport("http", 8080), eport("db", 3306)}
	asPlain = index(pod("ns", "a"), pod("ns", "b"))
	asMesh  = index(pod("ns", "a", meshed("linkerd")), pod("ns", "b", meshed("linkerd")))
)

var addressSetCases = []addressSetCase{
	{
		name: "no slices: exists, empty",
		svc:  asWeb, port: 80,
		want: []string{},
	},
	{
		name: "ready, ready unset, not ready",
		svc:  asWeb, port: 80,
		slices: []*discoveryv1.EndpointSlice{eslice("ns", "web-1", "web", v4, asPorts,
			endpoint("", "10.0.0.1"),
			withReady(endpoint("", "10.0.0.2"), nil),
			withReady(endpoint("", "10.0.0.3"), ptr(false)),
		)},
		want: []string{"10.0.0.1:8080", "10.0.0.2:8080"},
	},
	{
		name: "named target port resolves per slice",
		svc:  asWeb, port: 80,
		slices: []*discoveryv1.EndpointSlice{
			eslice("ns", "web-1", "web", v4, []discoveryv1.EndpointPort{eport("http", 8080)}, endpoint("", "10.0.0.1")),
			eslice("ns", "web-2", "web", v4, []discoveryv1.EndpointPort{eport("http", 9090)}, endpoint("", "10.0.0.2")),
		},
		want: []string{"10.0.0.1:8080", "10.0.0.2:9090"},
	},
	{
		name: "second service port by number",
		svc:  asWeb, port: 3306,
		slices: []*discoveryv1.EndpointSlice{eslice("ns", "web-1", "web", v4, asPorts, endpoint("", "10.0.0.1"))},
		want:   []string{"10.0.0.1:3306"},
	},
	{
		name: "unnamed single port",
		svc:  service("ns", "web", sport("", 80)), port: 80,
		slices: []*discoveryv1.EndpointSlice{eslice("ns", "web-1", "web", v4, []discoveryv1.EndpointPort{eport("", 8080)}, endpoint("", "10.0.0.1"))},
		want:   []string{"10.0.0.1:8080"},
	},
	{
		name: "unknown service port: requested port on every endpoint",
		svc:  asWeb, port: 7777,
		slices: []*discoveryv1.EndpointSlice{eslice("ns", "web-1", "web", v4, asPorts, endpoint("", "10.0.0.1"), endpoint("", "10.0.0.2"))},
		want:   []string{"10.0.0.1:7777", "10.0.0.2:7777"},
	},
	{
		name: "slice without the named port or without ports contributes nothing",
		svc:  asWeb, port: 80,
		slices: []*discoveryv1.EndpointSlice{
			eslice("ns", "web-1", "web", v4, []discoveryv1.EndpointPort{eport("admin", 9990)}, endpoint("", "10.0.0.1")),
			eslice("ns", "web-2", "web", v4, nil, endpoint("", "10.0.0.2")),
			eslice("ns", "web-3", "web", v4, []discoveryv1.EndpointPort{{Name: ptr("http")}}, endpoint("", "10.0.0.3")),
			eslice("ns", "web-4", "web", v4, []discoveryv1.EndpointPort{eport("http", 8080)}, endpoint("", "10.0.0.4")),
		},
		want: []string{"10.0.0.4:8080"},
	},
	{
		name: "IPv6 slice, FQDN slice skipped, wrong family skipped",
		svc:  asWeb, port: 80,
		slices: []*discoveryv1.EndpointSlice{
			eslice("ns", "web-6", "web", v6, asPorts, endpoint("", "fd00::1", "10.0.0.9", "fe80::1%eth0", "nonsense")),
			eslice("ns", "web-4", "web", v4, asPorts, endpoint("", "10.0.0.1", "fd00::2", "::ffff:10.0.0.3")),
			eslice("ns", "web-f", "web", fqdn, asPorts, endpoint("", "example.com")),
		},
		want: []string{"10.0.0.1:8080", "[fd00::1]:8080"},
	},
	{
		name: "all addresses of an endpoint",
		svc:  asWeb, port: 80,
		slices: []*discoveryv1.EndpointSlice{eslice("ns", "web-1", "web", v4, asPorts, endpoint("a", "10.0.0.1", "10.0.0.2"))},
		pods:   asPlain,
		want: []string{
			"10.0.0.1:8080 pod=ns/a [pod=a,serviceaccount=sa-a]",
			"10.0.0.2:8080 pod=ns/a [pod=a,serviceaccount=sa-a]",
		},
	},
	{
		// Another kind (an ExternalWorkload, whose identity Meridian does not read) is left
		// out: served bare, a meshed workload would be reached in plaintext.
		name: "unknown pod left out, no targetRef kept unmeshed, other kinds left out",
		svc:  asWeb, port: 80,
		slices: []*discoveryv1.EndpointSlice{eslice("ns", "web-1", "web", v4, asPorts,
			endpoint("a", "10.0.0.1"),
			endpoint("gone", "10.0.0.2"),
			endpoint("", "10.0.0.3"),
			func() discoveryv1.Endpoint {
				e := endpoint("", "10.0.0.4")
				e.TargetRef = &corev1.ObjectReference{Kind: "ExternalWorkload", Name: "vm"}
				return e
			}(),
		)},
		pods: asMesh,
		want: []string{
			"10.0.0.1:8080 pod=ns/a id=" + idA + " hint=h2 h2c [control_plane_ns=linkerd,pod=a,serviceaccount=sa-a]",
			"10.0.0.3:8080",
		},
	},
	{
		name: "nil pod lookup: pod endpoints left out",
		svc:  asWeb, port: 80,
		slices: []*discoveryv1.EndpointSlice{eslice("ns", "web-1", "web", v4, asPorts, endpoint("a", "10.0.0.1"), endpoint("", "10.0.0.2"))},
		want:   []string{"10.0.0.2:8080"},
	},
	{
		name: "targetRef namespace is honoured",
		svc:  asWeb, port: 80,
		slices: []*discoveryv1.EndpointSlice{eslice("ns", "web-1", "web", v4, asPorts, func() discoveryv1.Endpoint {
			e := endpoint("a", "10.0.0.1")
			e.TargetRef.Namespace = "other"
			return e
		}())},
		pods: index(pod("other", "a", meshed("linkerd"))),
		want: []string{"10.0.0.1:8080 pod=other/a id=sa-a.other.serviceaccount.identity.linkerd.cluster.local hint=h2 h2c [control_plane_ns=linkerd,pod=a,serviceaccount=sa-a]"},
	},
	{
		name: "meshed vs unmeshed vs other control plane",
		svc:  asWeb, port: 80,
		slices: []*discoveryv1.EndpointSlice{eslice("ns", "web-1", "web", v4, asPorts,
			endpoint("a", "10.0.0.1"), endpoint("b", "10.0.0.2"), endpoint("c", "10.0.0.3"))},
		pods: index(pod("ns", "a", meshed("linkerd")), pod("ns", "b"), pod("ns", "c", meshed("other"))),
		want: []string{
			"10.0.0.1:8080 pod=ns/a id=" + idA + " hint=h2 h2c [control_plane_ns=linkerd,pod=a,serviceaccount=sa-a]",
			"10.0.0.2:8080 pod=ns/b [pod=b,serviceaccount=sa-b]",
			"10.0.0.3:8080 pod=ns/c [pod=c,serviceaccount=sa-c]",
		},
	},
	{
		name: "empty service account means default",
		svc:  asWeb, port: 80,
		slices: []*discoveryv1.EndpointSlice{eslice("ns", "web-1", "web", v4, asPorts, endpoint("a", "10.0.0.1"))},
		pods:   index(pod("ns", "a", meshed("linkerd"), sa(""))),
		want:   []string{"10.0.0.1:8080 pod=ns/a id=default.ns.serviceaccount.identity.linkerd.cluster.local hint=h2 h2c [control_plane_ns=linkerd,pod=a,serviceaccount=default]"},
	},
	{
		name: "skip-inbound-ports: no identity, hint or http2 on that port",
		svc:  asWeb, port: 80,
		slices: []*discoveryv1.EndpointSlice{eslice("ns", "web-1", "web", v4, asPorts, endpoint("a", "10.0.0.1"), endpoint("b", "10.0.0.2"))},
		pods: index(
			pod("ns", "a", meshed("linkerd"), annotate(AnnotationSkipInboundPorts, "22, 8000-8100")),
			pod("ns", "b", meshed("linkerd"), annotate(AnnotationSkipInboundPorts, "8081,bogus")),
		),
		want: []string{
			"10.0.0.1:8080 pod=ns/a [control_plane_ns=linkerd,pod=a,serviceaccount=sa-a]",
			"10.0.0.2:8080 pod=ns/b id=sa-b.ns.serviceaccount.identity.linkerd.cluster.local hint=h2 h2c [control_plane_ns=linkerd,pod=b,serviceaccount=sa-b]",
		},
	},
	{
		name: "default opaque port",
		svc:  asWeb, port: 3306,
		slices: []*discoveryv1.EndpointSlice{eslice("ns", "web-1", "web", v4, asPorts, endpoint("a", "10.0.0.1"), endpoint("b", "10.0.0.2"))},
		pods:   index(pod("ns", "a", meshed("linkerd")), pod("ns", "b")),
		want: []string{
			"10.0.0.1:3306 pod=ns/a id=" + idA + " hint=opaque otp=4143 h2c [control_plane_ns=linkerd,pod=a,serviceaccount=sa-a]",
			"10.0.0.2:3306 pod=ns/b [pod=b,serviceaccount=sa-b]",
		},
	},
	{
		name: "opaque-ports annotation overrides the defaults",
		svc:  asWeb, port: 80,
		slices: []*discoveryv1.EndpointSlice{eslice("ns", "web-1", "web", v4, asPorts, endpoint("a", "10.0.0.1"))},
		pods:   index(pod("ns", "a", meshed("linkerd"), annotate(AnnotationOpaquePorts, "8000-8090"))),
		want:   []string{"10.0.0.1:8080 pod=ns/a id=" + idA + " hint=opaque otp=4143 h2c [control_plane_ns=linkerd,pod=a,serviceaccount=sa-a]"},
	},
	{
		name: "opaque-ports annotation without the default port",
		svc:  asWeb, port: 3306,
		slices: []*discoveryv1.EndpointSlice{eslice("ns", "web-1", "web", v4, asPorts, endpoint("a", "10.0.0.1"), endpoint("b", "10.0.0.2"))},
		pods: index(
			pod("ns", "a", meshed("linkerd"), annotate(AnnotationOpaquePorts, "")),
			pod("ns", "b", meshed("linkerd"), annotate(AnnotationOpaquePorts, "5432")),
		),
		want: []string{
			"10.0.0.1:3306 pod=ns/a id=" + idA + " hint=h2 h2c [control_plane_ns=linkerd,pod=a,serviceaccount=sa-a]",
			"10.0.0.2:3306 pod=ns/b id=sa-b.ns.serviceaccount.identity.linkerd.cluster.local hint=h2 h2c [control_plane_ns=linkerd,pod=b,serviceaccount=sa-b]",
		},
	},
	{
		name: "opaque-ports annotation naming a container port",
		svc:  asWeb, port: 80,
		slices: []*discoveryv1.EndpointSlice{eslice("ns", "web-1", "web", v4, asPorts, endpoint("a", "10.0.0.1"))},
		pods:   index(pod("ns", "a", meshed("linkerd"), containerPort("web", 8080), annotate(AnnotationOpaquePorts, "web"))),
		want:   []string{"10.0.0.1:8080 pod=ns/a id=" + idA + " hint=opaque otp=4143 h2c [control_plane_ns=linkerd,pod=a,serviceaccount=sa-a]"},
	},
	{
		name: "owner kinds",
		svc:  asWeb, port: 80,
		slices: []*discoveryv1.EndpointSlice{eslice("ns", "web-1", "web", v4, asPorts,
			endpoint("d", "10.0.0.1"), endpoint("s", "10.0.0.2"), endpoint("ds", "10.0.0.3"), endpoint("j", "10.0.0.4"),
			endpoint("rs", "10.0.0.5"), endpoint("rsx", "10.0.0.6"), endpoint("bare", "10.0.0.7"), endpoint("cr", "10.0.0.8"))},
		pods: index(
			pod("ns", "d", owned("ReplicaSet", "web-5d4f8b9c7"), label(LabelPodTemplateHash, "5d4f8b9c7")),
			pod("ns", "s", owned("StatefulSet", "db")),
			pod("ns", "ds", owned("DaemonSet", "agent")),
			pod("ns", "j", owned("Job", "migrate-29")),
			pod("ns", "rs", owned("ReplicaSet", "loose")),
			pod("ns", "rsx", owned("ReplicaSet", "web-abc"), label(LabelPodTemplateHash, "xyz")),
			pod("ns", "bare"),
			pod("ns", "cr", owned("Rollout", "canary")),
		),
		want: []string{
			"10.0.0.1:8080 pod=ns/d [deployment=web,pod=d,pod_template_hash=5d4f8b9c7,serviceaccount=sa-d]",
			"10.0.0.2:8080 pod=ns/s [pod=s,serviceaccount=sa-s,statefulset=db]",
			"10.0.0.3:8080 pod=ns/ds [daemonset=agent,pod=ds,serviceaccount=sa-ds]",
			"10.0.0.4:8080 pod=ns/j [job=migrate-29,pod=j,serviceaccount=sa-j]",
			"10.0.0.5:8080 pod=ns/rs [pod=rs,replicaset=loose,serviceaccount=sa-rs]",
			"10.0.0.6:8080 pod=ns/rsx [pod=rsx,pod_template_hash=xyz,replicaset=web-abc,serviceaccount=sa-rsx]",
			"10.0.0.7:8080 pod=ns/bare [pod=bare,serviceaccount=sa-bare]",
			"10.0.0.8:8080 pod=ns/cr [pod=cr,rollout=canary,serviceaccount=sa-cr]",
		},
	},
	{
		name: "owner label sorts among the others",
		svc:  asWeb, port: 80,
		slices: []*discoveryv1.EndpointSlice{eslice("ns", "web-1", "web", v4, asPorts,
			withZone(endpoint("a", "10.0.0.1"), "z"), withZone(endpoint("b", "10.0.0.2"), "z"), withZone(endpoint("c", "10.0.0.3"), "z"))},
		pods: index(
			pod("ns", "a", meshed("linkerd"), owned("AppSet", "x"), label(LabelPodTemplateHash, "h")),
			pod("ns", "b", meshed("linkerd"), owned("Zeta", "y"), label(LabelPodTemplateHash, "h")),
			pod("ns", "c", meshed("linkerd"), owned("Zone", "clash")),
		),
		want: []string{
			"10.0.0.1:8080 pod=ns/a id=" + idA + " hint=h2 h2c [appset=x,control_plane_ns=linkerd,pod=a,pod_template_hash=h,serviceaccount=sa-a,zone=z]",
			"10.0.0.2:8080 pod=ns/b id=sa-b.ns.serviceaccount.identity.linkerd.cluster.local hint=h2 h2c [control_plane_ns=linkerd,pod=b,pod_template_hash=h,serviceaccount=sa-b,zeta=y,zone=z]",
			"10.0.0.3:8080 pod=ns/c id=sa-c.ns.serviceaccount.identity.linkerd.cluster.local hint=h2 h2c [control_plane_ns=linkerd,pod=c,serviceaccount=sa-c,zone=z]",
		},
	},
	{
		name: "zone label, on pods and on bare addresses",
		svc:  asWeb, port: 80,
		slices: []*discoveryv1.EndpointSlice{eslice("ns", "web-1", "web", v4, asPorts,
			withZone(endpoint("a", "10.0.0.1"), "eu-1a"), withZone(endpoint("", "10.0.0.2"), "eu-1b"))},
		pods: asMesh,
		want: []string{
			"10.0.0.1:8080 pod=ns/a id=" + idA + " hint=h2 h2c [control_plane_ns=linkerd,pod=a,serviceaccount=sa-a,zone=eu-1a]",
			"10.0.0.2:8080 [zone=eu-1b]",
		},
	},
	{
		name: "slices of other services or namespaces are ignored",
		svc:  asWeb, port: 80,
		slices: []*discoveryv1.EndpointSlice{
			eslice("ns", "api-1", "api", v4, asPorts, endpoint("", "10.0.0.1")),
			eslice("other", "web-1", "web", v4, asPorts, endpoint("", "10.0.0.2")),
			nil,
			eslice("ns", "web-1", "web", v4, asPorts, endpoint("", "10.0.0.3")),
		},
		want: []string{"10.0.0.3:8080"},
	},
	{
		name: "an address in two slices comes from the smaller slice name",
		svc:  asWeb, port: 80,
		slices: []*discoveryv1.EndpointSlice{
			eslice("ns", "web-b", "web", v4, asPorts, endpoint("b", "10.0.0.1")),
			eslice("ns", "web-a", "web", v4, asPorts, endpoint("a", "10.0.0.1")),
		},
		pods: asPlain,
		want: []string{"10.0.0.1:8080 pod=ns/a [pod=a,serviceaccount=sa-a]"},
	},
	{
		name: "hostname selects one endpoint",
		svc:  asWeb, port: 80, host: "web-0",
		slices: []*discoveryv1.EndpointSlice{eslice("ns", "web-1", "web", v4, asPorts,
			withHostname(endpoint("", "10.0.0.1"), "web-0"), withHostname(endpoint("", "10.0.0.2"), "web-1"), endpoint("", "10.0.0.3"))},
		want: []string{"10.0.0.1:8080 host=web-0"},
	},
	{
		name: "hostname carried on every endpoint",
		svc:  asWeb, port: 80,
		slices: []*discoveryv1.EndpointSlice{eslice("ns", "web-1", "web", v4, asPorts,
			withHostname(endpoint("", "10.0.0.1"), "web-0"), withHostname(endpoint("", "10.0.0.2"), "web-1"), endpoint("", "10.0.0.3"))},
		want: []string{"10.0.0.1:8080 host=web-0", "10.0.0.2:8080 host=web-1", "10.0.0.3:8080"},
	},
	{
		name: "TCP service port preferred over UDP of the same number",
		svc: service("ns", "dns", corev1.ServicePort{Name: "dns-udp", Port: 53, Protocol: corev1.ProtocolUDP},
			corev1.ServicePort{Name: "dns-tcp", Port: 53, Protocol: corev1.ProtocolTCP}),
		port: 53,
		slices: []*discoveryv1.EndpointSlice{eslice("ns", "dns-1", "dns", v4,
			[]discoveryv1.EndpointPort{eport("dns-udp", 1053), eport("dns-tcp", 2053)}, endpoint("", "10.0.0.1"))},
		want: []string{"10.0.0.1:2053"},
	},
}

func TestAddressSet(t *testing.T) {
	cfg := DefaultConfig()
	for _, tc := range addressSetCases {
		t.Run(tc.name, func(t *testing.T) {
			var lookup PodLookup
			if tc.pods != nil {
				lookup = tc.pods.lookup
			}
			in := deepCopySlices(tc.slices)
			set := hostSet(cfg, tc.svc, tc.port, tc.host, tc.slices, lookup)
			if !set.Exists {
				t.Fatal("Exists = false for an existing service")
			}
			if want := []snapshot.Label{{Key: "namespace", Value: tc.svc.Namespace}, {Key: "service", Value: tc.svc.Name}}; !slices.Equal(set.Labels, want) {
				t.Errorf("set labels = %v, want %v", set.Labels, want)
			}
			got := renderSet(set)
			if !slices.Equal(got, tc.want) {
				t.Errorf("endpoints:\n got  %q\n want %q", got, tc.want)
			}
			for i, e := range set.Endpoints {
				if i > 0 && set.Endpoints[i-1].Addr.Compare(e.Addr) >= 0 {
					t.Errorf("endpoint %v after %v: not strictly in address order", e.Addr, set.Endpoints[i-1].Addr)
				}
				if !labelsStrictlySorted(e.Labels) || slices.ContainsFunc(e.Labels, func(l snapshot.Label) bool { return l.Key == LabelKeyPod }) {
					t.Errorf("%v: labels not sorted: %v", e.Addr, e.Labels)
				}
			}
			if !equalSlices(in, tc.slices) {
				t.Error("AddressSet modified its input slices")
			}
			if tc.host == "" {
				if got := addressSet(cfg, tc.svc, tc.port, tc.slices, lookup); !got.Equal(set) {
					t.Error("AddressSet differs from HostAddressSet with no hostname")
				}
			}
		})
	}
}

func deepCopySlices(in []*discoveryv1.EndpointSlice) []*discoveryv1.EndpointSlice {
	out := make([]*discoveryv1.EndpointSlice, len(in))
	for i, s := range in {
		if s != nil {
			out[i] = s.DeepCopy()
		}
	}
	return out
}

func equalSlices(a, b []*discoveryv1.EndpointSlice) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !reflect.DeepEqual(a[i], b[i]) {
			return false
		}
	}
	return true
}

func TestAddressSetNilService(t *testing.T) {
	s := addressSet(DefaultConfig(), nil, 80, []*discoveryv1.EndpointSlice{eslice("ns", "web-1", "web", v4, nil, endpoint("", "10.0.0.1"))}, nil)
	if s == nil || s.Exists || s.Len() != 0 {
		t.Fatalf("addressSet(nil svc) = %+v, want Exists false and no endpoints", s)
	}
}

func TestAddressSetConfig(t *testing.T) {
	cfg := Config{ClusterDomain: "example.org", ControlPlaneNamespace: "mesh", TrustDomain: "corp.example", DefaultOpaquePorts: []uint32{8080}, InboundProxyPort: 5000}
	web := service("ns", "web", sport("http", 80))
	sl := []*discoveryv1.EndpointSlice{eslice("ns", "web-1", "web", v4, []discoveryv1.EndpointPort{eport("http", 8080)}, endpoint("a", "10.0.0.1"), endpoint("b", "10.0.0.2"))}
	pods := index(pod("ns", "a", meshed("mesh")), pod("ns", "b", meshed("linkerd")))
	got := renderSet(addressSet(cfg, web, 80, sl, pods.lookup))
	want := []string{
		"10.0.0.1:8080 pod=ns/a id=sa-a.ns.serviceaccount.identity.mesh.corp.example hint=opaque otp=5000 h2c [control_plane_ns=mesh,pod=a,serviceaccount=sa-a]",
		"10.0.0.2:8080 pod=ns/b [pod=b,serviceaccount=sa-b]",
	}
	if !slices.Equal(got, want) {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}

func TestAddressSetSliceOrderDoesNotMatter(t *testing.T) {
	web := service("ns", "web", sport("http", 80))
	pods := index(pod("ns", "a"), pod("ns", "b"), pod("ns", "c"))
	sl := []*discoveryv1.EndpointSlice{
		eslice("ns", "web-c", "web", v4, []discoveryv1.EndpointPort{eport("http", 8080)}, endpoint("c", "10.0.0.1", "10.0.0.3")),
		eslice("ns", "web-a", "web", v4, []discoveryv1.EndpointPort{eport("http", 8080)}, endpoint("a", "10.0.0.1")),
		eslice("ns", "web-b", "web", v4, []discoveryv1.EndpointPort{eport("http", 8080)}, endpoint("b", "10.0.0.1", "10.0.0.2")),
	}
	first := addressSet(DefaultConfig(), web, 80, sl, pods.lookup)
	rev := slices.Clone(sl)
	slices.Reverse(rev)
	if second := addressSet(DefaultConfig(), web, 80, rev, pods.lookup); !first.Equal(second) {
		t.Errorf("order changes the result:\n%q\n%q", renderSet(first), renderSet(second))
	}
	if sl[0].Name != "web-c" {
		t.Error("AddressSet reordered its input")
	}
}

func TestIsExternalName(t *testing.T) {
	ext := service("ns", "ext")
	ext.Spec.Type = corev1.ServiceTypeExternalName
	ext.Spec.ExternalName = "example.com"
	for _, tc := range []struct {
		svc  *corev1.Service
		want bool
	}{{nil, false}, {service("ns", "web"), false}, {ext, true}} {
		if got := IsExternalName(tc.svc); got != tc.want {
			t.Errorf("IsExternalName(%v) = %v, want %v", tc.svc, got, tc.want)
		}
	}
}

func TestIdentity(t *testing.T) {
	if got, want := Identity(DefaultConfig(), "web", "shop"), "web.shop.serviceaccount.identity.linkerd.cluster.local"; got != want {
		t.Errorf("Identity = %q, want %q", got, want)
	}
}

func TestOwner(t *testing.T) {
	multi := pod("ns", "p")
	multi.OwnerReferences = append(multi.OwnerReferences,
		metav1OwnerRef("ConfigMap", "x", false), metav1OwnerRef("StatefulSet", "db", true))
	ambiguous := pod("ns", "p")
	ambiguous.OwnerReferences = append(ambiguous.OwnerReferences, metav1OwnerRef("A", "x", false), metav1OwnerRef("B", "y", false))
	single := pod("ns", "p")
	single.OwnerReferences = append(single.OwnerReferences, metav1OwnerRef("DaemonSet", "agent", false))
	hashOnly := pod("ns", "p", owned("ReplicaSet", "-h"), label(LabelPodTemplateHash, "h"))
	for _, tc := range []struct {
		name       string
		pod        *corev1.Pod
		kind, want string
	}{
		{"controller among several", multi, "statefulset", "db"},
		{"several, none controller", ambiguous, "", ""},
		{"single non-controller", single, "daemonset", "agent"},
		{"no owner", pod("ns", "p"), "", ""},
		{"replicaset named only by the hash", hashOnly, "replicaset", "-h"},
	} {
		if k, n := Owner(SlimPod(tc.pod)); k != tc.kind || n != tc.want {
			t.Errorf("%s: Owner = %q %q, want %q %q", tc.name, k, n, tc.kind, tc.want)
		}
	}
}

// TestAddressSetTransportHeaderMode: with --outbound-transport-mode transport-header every
// meshed endpoint carries the opaque-transport port (its hint unchanged), so client proxies
// reach it at the inbound port with the transport header; unmeshed endpoints do not.
func TestAddressSetTransportHeaderMode(t *testing.T) {
	cfg := DefaultConfig()
	cfg.OutboundTransportMode = TransportHeader
	web := service("ns", "web", sport("http", 80))
	sl := []*discoveryv1.EndpointSlice{eslice("ns", "web-1", "web", v4, []discoveryv1.EndpointPort{eport("http", 8080)}, endpoint("a", "10.0.0.1"), endpoint("b", "10.0.0.2"))}
	pods := index(pod("ns", "a", meshed("linkerd")), pod("ns", "b"))
	got := renderSet(addressSet(cfg, web, 80, sl, pods.lookup))
	want := []string{
		"10.0.0.1:8080 pod=ns/a id=sa-a.ns.serviceaccount.identity.linkerd.cluster.local hint=h2 otp=4143 h2c [control_plane_ns=linkerd,pod=a,serviceaccount=sa-a]",
		"10.0.0.2:8080 pod=ns/b [pod=b,serviceaccount=sa-b]",
	}
	if !slices.Equal(got, want) {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	if _, err := ParseOutboundTransportMode("opaque"); err == nil {
		t.Error("ParseOutboundTransportMode accepted an unknown mode")
	}
}
