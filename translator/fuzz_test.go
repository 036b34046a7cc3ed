package translator

import (
	"errors"
	"net/netip"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/meridian-mesh/meridian/internal/quote"
	"github.com/meridian-mesh/meridian/internal/testutil"
	"github.com/meridian-mesh/meridian/snapshot"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

func FuzzParseAuthority(f *testing.F) {
	for _, s := range []string{
		"web.shop.svc.cluster.local", "web.shop.svc.cluster.local:8080", "web-0.web.shop.svc.cluster.local.:1",
		"WEB.SHOP.SVC.CLUSTER.LOCAL", "10.0.0.1:80", "[fd00::1]:80", "fd00::1", "[x]", ":", "", "a:b:c",
		"web.shop.svc.example.org", "web..svc.cluster.local", "web.shop.svc.cluster.local:0", "web.shop.svc.cluster.local:65536",
		"web.shop.svc.cluster.local:+1", "\x00.shop.svc.cluster.local", "é.shop.svc.cluster.local",
		strings.Repeat("\x00", 4096), strings.Repeat("é", 300) + ".shop.svc.cluster.local:80", "w\xc3b.shop.svc.cluster.local",
	} {
		f.Add(s)
	}
	cfg := DefaultConfig()
	f.Fuzz(func(t *testing.T, path string) {
		got, err := ParseAuthority(cfg, path)
		if err != nil {
			if got != (Target{}) {
				t.Fatalf("error %v with a non-zero target %+v", err, got)
			}
			if err.Error() == "" {
				t.Fatal("empty error message")
			}
			// The message quotes a bounded prefix of the input, in valid UTF-8.
			if msg := err.Error(); len(msg) > 4*quote.Max || !utf8.ValidString(msg) {
				t.Fatalf("error of %d bytes (valid UTF-8: %v) for a %d-byte path", len(msg), utf8.ValidString(msg), len(path))
			}
			return
		}
		if got.Port < 1 || got.Port > 65535 {
			t.Fatalf("port %d out of range", got.Port)
		}
		for _, l := range []string{got.Service, got.Namespace} {
			if checkLabel("x", l) != nil {
				t.Fatalf("%q: bad label %q in %+v", path, l, got)
			}
		}
		if got.Hostname != "" && checkLabel("x", got.Hostname) != nil {
			t.Fatalf("%q: bad hostname in %+v", path, got)
		}
		// What we accept, we accept again in canonical form with the same result.
		canon := got.Service + "." + got.Namespace + ".svc." + cfg.ClusterDomain + ":" + strconv.Itoa(int(got.Port))
		if got.Hostname != "" {
			canon = got.Hostname + "." + canon
		}
		again, err := ParseAuthority(cfg, canon)
		if err != nil || again != got {
			t.Fatalf("%q gives %+v; its canonical form %q gives %+v, %v", path, got, canon, again, err)
		}
		if _, err := netip.ParseAddr(path); err == nil {
			t.Fatalf("IP address %q accepted", path)
		}
	})
}

func TestParseAuthorityIPError(t *testing.T) {
	_, err := ParseAuthority(DefaultConfig(), "192.168.1.1:80")
	if !errors.Is(err, ErrIPAddress) {
		t.Fatalf("err = %v, want ErrIPAddress", err)
	}
}

func FuzzParseContextToken(f *testing.F) {
	for _, s := range []string{
		"", `{"ns":"shop","nodeName":"n","pod":"p"}`, "ns:shop", "ns:", "ns:a:b", "null", `{"ns":1}`, "{", `"x"`, "ns:\x00",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := ParseContextToken(s)
		if ns, ok := strings.CutPrefix(s, "ns:"); ok && !strings.Contains(ns, ":") && got != (ContextToken{Namespace: ns}) {
			t.Fatalf("legacy token %q gives %+v", s, got)
		}
		if got.Namespace != "" && !strings.HasPrefix(s, "ns:") && !strings.Contains(s, "{") {
			t.Fatalf("%q: namespace %q from neither JSON nor legacy form", s, got.Namespace)
		}
	})
}

func FuzzOpaquePorts(f *testing.F) {
	for _, s := range []string{"", "25", "25,587,3306", "4000-4100", " 1 - 65535 ", "mysql,80", "0", "65536", "5-1", ",,", "a--b", "-", "99999999999999999999"} {
		f.Add(s, uint16(4050))
	}
	cfg := DefaultConfig()
	f.Fuzz(func(t *testing.T, s string, port16 uint16) {
		port := uint32(port16)
		l, err := ParsePortList(s)
		p := pod("ns", "p", annotate(AnnotationOpaquePorts, s), annotate(AnnotationSkipInboundPorts, s))
		opaque, skipped := IsOpaque(cfg, SlimPod(p), port), IsSkippedInbound(SlimPod(p), port)
		if opaque != skipped {
			t.Fatalf("%q port %d: opaque %v but skipped %v with no named container ports", s, port, opaque, skipped)
		}
		if err != nil {
			if len(err.Error()) > 4*quote.Max { // each of its parts quotes a short prefix
				t.Fatalf("a %d-byte error for %d bytes of input", len(err.Error()), len(s))
			}
			return
		}
		for _, r := range l.Ranges {
			if r.Lo < 1 || r.Hi > 65535 || r.Lo > r.Hi {
				t.Fatalf("%q: bad range %+v", s, r)
			}
		}
		for _, n := range l.Names {
			if n == "" || isDigits(n) {
				t.Fatalf("%q: bad name %q", s, n)
			}
		}
		if l.Contains(port) != opaque {
			t.Fatalf("%q port %d: ParsePortList says %v, IsOpaque says %v", s, port, l.Contains(port), opaque)
		}
		// With a container port for every name, names resolve too.
		for _, n := range l.Names {
			containerPort(n, int32(port))(p)
		}
		if want := l.Contains(port) || (len(l.Names) > 0 && port != 0); IsOpaque(cfg, SlimPod(p), port) != want {
			t.Fatalf("%q port %d with named ports: IsOpaque %v, want %v", s, port, !want, want)
		}
	})
}

func pickFrom[T any](r *testutil.FuzzBytes, xs []T) T { return xs[r.Pick(len(xs))] }

var (
	fuzzNames     = []string{"", "http", "db", "admin"}
	fuzzPorts     = []int32{80, 8080, 3306, 4143, 0, -1, 65535, 70000}
	fuzzAddrs     = []string{"10.0.0.1", "10.0.0.2", "10.0.0.3", "fd00::1", "fd00::2", "::ffff:10.0.0.1", "fe80::1%eth0", "bogus", "", "010.0.0.1"}
	fuzzTypes     = []discoveryv1.AddressType{v4, v4, v6, fqdn, ""}
	fuzzPodNames  = []string{"p0", "p1", "p2", "p3", ""}
	fuzzAnnots    = []string{"", "3306", "8080", "1-65535", "http", "db,80", "bad,,", "4000-100"}
	fuzzKinds     = []string{"ReplicaSet", "StatefulSet", "DaemonSet", "Job", "Pod", "Zone", "ServiceAccount", ""}
	fuzzOwnerName = []string{"web-abc", "abc", "-abc", "db", ""}
)

// fuzzWorld builds a Service, its slices and pods from fuzz bytes.
func fuzzWorld(data []byte) (*corev1.Service, uint32, []*discoveryv1.EndpointSlice, podIndex) {
	r := testutil.NewFuzzBytes(data)
	svc := service("ns", "web")
	for range r.Pick(4) {
		sp := corev1.ServicePort{Name: pickFrom(r, fuzzNames), Port: pickFrom(r, fuzzPorts), Protocol: pickFrom(r, []corev1.Protocol{"", "TCP", "UDP"})}
		svc.Spec.Ports = append(svc.Spec.Ports, sp)
	}
	port := uint32(pickFrom(r, fuzzPorts))
	if r.Pick(4) == 0 {
		port = uint32(r.Byte())<<8 | uint32(r.Byte())
	}
	var sl []*discoveryv1.EndpointSlice
	for range r.Pick(5) {
		es := eslice(pickFrom(r, []string{"ns", "ns", "other"}), pickFrom(r, []string{"a", "b", "c", "a"}), pickFrom(r, []string{"web", "web", "api"}), pickFrom(r, fuzzTypes), nil)
		for range r.Pick(4) {
			p := discoveryv1.EndpointPort{}
			if r.Pick(4) != 0 {
				p.Name = ptr(pickFrom(r, fuzzNames))
			}
			if r.Pick(5) != 0 {
				p.Port = ptr(pickFrom(r, fuzzPorts))
			}
			es.Ports = append(es.Ports, p)
		}
		for range r.Pick(7) {
			var addrs []string
			for range r.Pick(4) {
				addrs = append(addrs, pickFrom(r, fuzzAddrs))
			}
			ep := endpoint(pickFrom(r, fuzzPodNames), addrs...)
			ep.Conditions.Ready = pickFrom(r, []*bool{nil, ptr(true), ptr(false)})
			if r.Pick(3) == 0 {
				ep.Zone = ptr(pickFrom(r, []string{"", "z1", "z2"}))
			}
			if r.Pick(3) == 0 {
				ep.Hostname = ptr(pickFrom(r, []string{"", "h0", "h1"}))
			}
			if ep.TargetRef != nil && r.Pick(4) == 0 {
				ep.TargetRef.Kind = "Node"
			}
			es.Endpoints = append(es.Endpoints, ep)
		}
		sl = append(sl, es)
	}
	if r.Pick(8) == 0 {
		sl = append(sl, nil)
	}
	pods := podIndex{}
	for _, name := range fuzzPodNames[:4] {
		if r.Pick(4) == 0 {
			continue // unknown pod
		}
		p := pod("ns", name)
		if r.Pick(3) != 0 {
			p.Labels[LabelControlPlaneNS] = pickFrom(r, []string{"linkerd", "linkerd", "other", ""})
		}
		if r.Pick(2) == 0 {
			p.Annotations[AnnotationOpaquePorts] = pickFrom(r, fuzzAnnots)
		}
		if r.Pick(2) == 0 {
			p.Annotations[AnnotationSkipInboundPorts] = pickFrom(r, fuzzAnnots)
		}
		if r.Pick(2) == 0 {
			p.Labels[LabelPodTemplateHash] = pickFrom(r, []string{"abc", ""})
		}
		for range r.Pick(3) {
			owned(pickFrom(r, fuzzKinds), pickFrom(r, fuzzOwnerName))(p)
			p.OwnerReferences[len(p.OwnerReferences)-1].Controller = pickFrom(r, []*bool{nil, ptr(true), ptr(false)})
		}
		if r.Pick(2) == 0 {
			containerPort(pickFrom(r, fuzzNames[1:]), pickFrom(r, fuzzPorts))(p)
		}
		if r.Pick(4) == 0 {
			p.Spec.ServiceAccountName = ""
		}
		pods[p.Namespace+"/"+p.Name] = p
	}
	// Zone hints, and the annotations of a multicluster mirror.
	for _, es := range sl {
		if es == nil {
			continue
		}
		if r.Pick(3) == 0 {
			es.Annotations = map[string]string{AnnotationRemoteGatewayIdentity: pickFrom(r, []string{"", "gw.east"})}
			if r.Pick(2) == 0 {
				es.Annotations[AnnotationRemoteServiceFQName] = pickFrom(r, []string{"web.ns.svc.east", ""})
			}
		}
		for i := range es.Endpoints {
			for range r.Pick(3) {
				if es.Endpoints[i].Hints == nil {
					es.Endpoints[i].Hints = &discoveryv1.EndpointHints{}
				}
				es.Endpoints[i].Hints.ForZones = append(es.Endpoints[i].Hints.ForZones, discoveryv1.ForZone{Name: pickFrom(r, []string{"z1", "z2"})})
			}
		}
	}
	return svc, port, sl, pods
}

func FuzzAddressSet(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{1, 1, 0, 0, 0, 3, 0, 0, 0, 0, 2, 1, 0, 1, 0, 3, 2, 0, 1, 1, 1, 0, 3, 1, 1, 2, 3, 1, 1, 1})
	f.Add([]byte("an arbitrary but longer seed that exercises more of the choices made by fuzzWorld"))
	f.Add([]byte{3, 1, 1, 1, 2, 2, 1, 3, 3, 1, 0, 0, 4, 0, 0, 0, 2, 3, 1, 1, 0, 3, 6, 3, 0, 1, 2, 3, 4, 0, 1, 0, 1, 2, 1, 1, 1, 2, 0, 2, 1, 2, 1, 1, 1, 1, 1, 1})
	cfg := DefaultConfig()
	f.Fuzz(func(t *testing.T, data []byte) {
		svc, port, sl, pods := fuzzWorld(data)
		in := deepCopySlices(sl)
		set := addressSet(cfg, svc, port, sl, pods.lookup)
		if !set.Exists || len(set.Labels) != 2 {
			t.Fatalf("set %+v", set)
		}
		if !equalSlices(in, sl) {
			t.Fatal("input modified")
		}
		spName, named := servicePortName(svc, port)
		for i, e := range set.Endpoints {
			if i > 0 && set.Endpoints[i-1].Addr.Compare(e.Addr) >= 0 {
				t.Fatalf("%v after %v: not strictly in address order", e.Addr, set.Endpoints[i-1].Addr)
			}
			checkEndpoint(t, e.Addr, e, sl, svc, port, spName, named)
		}
		// Slim copies give the same set.
		ssvc, ssl, spods := slimAll(svc, sl, pods)
		if got := addressSet(cfg, ssvc, port, ssl, spods.lookup); !got.Equal(set) {
			t.Fatalf("slim objects give\n%q\nwant\n%q", renderSet(got), renderSet(set))
		}
		// Slice order does not matter when slice names are unique.
		names := map[string]bool{}
		unique := true
		for _, s := range sl {
			if s != nil {
				unique = unique && !names[s.Name]
				names[s.Name] = true
			}
		}
		if unique {
			rev := slices.Clone(sl)
			slices.Reverse(rev)
			if got := addressSet(cfg, svc, port, rev, pods.lookup); !got.Equal(set) {
				t.Fatalf("reversed slices give\n%q\nwant\n%q", renderSet(got), renderSet(set))
			}
		}
	})
}

// checkEndpoint checks one output endpoint against the inputs, independently of how
// AddressSet computes it.
func checkEndpoint(t *testing.T, a netip.AddrPort, e *snapshot.Endpoint, sl []*discoveryv1.EndpointSlice, svc *corev1.Service, port uint32, spName string, named bool) {
	t.Helper()
	if a != e.Addr || !a.IsValid() || a.Addr().Zone() != "" || a.Port() == 0 {
		t.Fatalf("bad address %v for key %v", e.Addr, a)
	}
	if e.Weight != DefaultWeight {
		t.Fatalf("%v: weight %d", a, e.Weight)
	}
	if !labelsStrictlySorted(e.Labels) || e.Label(LabelKeyPod) != e.PodName() || slices.ContainsFunc(e.Labels, func(l snapshot.Label) bool { return l.Key == LabelKeyPod }) {
		t.Fatalf("%v: labels %v not sorted and unique", a, e.Labels)
	}
	meshedHint := e.Hint != snapshot.HintNone
	if meshedHint != (e.Identity() != "") || meshedHint != e.HTTP2 || (e.Hint == snapshot.HintOpaque) != (e.OpaqueTransportPort != 0) {
		t.Fatalf("%v: inconsistent mesh fields %+v", a, e)
	}
	if e.Identity() != "" && e.PodName() != "" && e.Label(LabelKeyControlPlaneNS) == "" {
		t.Fatalf("%v: a pod's identity without control_plane_ns label", a)
	}
	if e.Label(LabelKeyZoneLocality) != ZoneUnknown || !slices.IsSorted(e.ForZones()) {
		t.Fatalf("%v: zone_locality %q, zones %v", a, e.Label(LabelKeyZoneLocality), e.ForZones())
	}
	// Some ready endpoint of one of the service's slices, with a port that resolves to the
	// address's port, holds the address.
	for _, es := range sl {
		if es == nil || es.Namespace != svc.Namespace || es.Labels[LabelServiceName] != svc.Name {
			continue
		}
		if !slicePortAllows(es, port, spName, named, uint32(a.Port())) {
			continue
		}
		for _, ep := range es.Endpoints {
			if ep.Conditions.Ready != nil && !*ep.Conditions.Ready {
				continue
			}
			for _, s := range ep.Addresses {
				if x, err := netip.ParseAddr(s); err == nil && x == a.Addr() {
					return
				}
			}
		}
	}
	t.Fatalf("%v is in no ready endpoint of the service's slices on a matching port", a)
}

func slicePortAllows(es *discoveryv1.EndpointSlice, port uint32, spName string, named bool, got uint32) bool {
	if !named {
		return len(es.Ports) > 0 && got == port
	}
	for _, p := range es.Ports {
		if (p.Name != nil && *p.Name == spName || p.Name == nil && spName == "") && p.Port != nil && uint32(*p.Port) == got {
			return true
		}
	}
	return false
}

// FuzzAddressSetReusing checks that taking endpoints over from an earlier set never changes
// the result: two worlds of the same Service and port, the second computed reusing the
// first's set with the pods that differ marked stale, give what AddressSet gives.
func FuzzAddressSetReusing(f *testing.F) {
	f.Add([]byte{}, []byte{})
	f.Add([]byte{1, 1, 0, 0, 0, 3, 0, 0, 0, 0, 2, 1, 0, 1, 0, 3, 2, 0, 1, 1, 1, 0, 3, 1, 1, 2, 3, 1, 1, 1},
		[]byte{1, 1, 0, 0, 0, 3, 0, 0, 0, 0, 2, 1, 0, 1, 0, 3, 2, 0, 1, 1, 1, 0, 3, 1, 1, 2, 3, 1, 2, 1})
	f.Add([]byte("an arbitrary but longer seed that exercises more of the choices made by fuzzWorld"),
		[]byte("an arbitrary but longer seed that exercises more of the choices made by fuzzWorlds"))
	cfg := DefaultConfig()
	f.Fuzz(func(t *testing.T, a, b []byte) {
		svc, port, slA, podsA := fuzzWorld(a)
		_, _, slB, podsB := fuzzWorld(b)
		prev := addressSet(cfg, svc, port, slA, podsA.lookup)
		stale := func(ns, name string) bool {
			pa, pb := podsA[ns+"/"+name], podsB[ns+"/"+name]
			return !reflect.DeepEqual(pa, pb)
		}
		want := addressSet(cfg, svc, port, slB, podsB.lookup)
		got := AddressSetReusing(cfg, Inputs{Service: svc, Slices: slimSlices(slB), Pods: podsB.lookup}, port, Reuse{Prev: prev, Stale: stale})
		if !got.Equal(want) {
			t.Fatalf("reusing gives\n%q\nwant\n%q", renderSet(got), renderSet(want))
		}
		// With nothing changed, every endpoint is taken over, unless the earlier set left
		// addresses out for want of their pods: then, as documented, nothing is.
		same := AddressSetReusing(cfg, Inputs{Service: svc, Slices: slimSlices(slA), Pods: podsA.lookup}, port, Reuse{Prev: prev})
		for _, e := range same.Endpoints {
			switch taken := prev.Lookup(e.Addr) == e; {
			case prev.Unresolved == 0 && !taken:
				t.Fatalf("%v: unchanged endpoint translated again", e.Addr)
			case prev.Unresolved > 0 && taken:
				t.Fatalf("%v: taken over from a set with %d unresolved addresses", e.Addr, prev.Unresolved)
			}
		}
		if !same.Equal(prev) {
			t.Fatalf("reusing the same inputs gives\n%q\nwant\n%q", renderSet(same), renderSet(prev))
		}
	})
}
