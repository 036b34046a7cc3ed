package shard

import (
	"fmt"
	"strings"
	"testing"
	"time"

	pb "github.com/linkerd/linkerd2-proxy-api/go/destination"
	httppb "github.com/linkerd/linkerd2-proxy-api/go/http_types"
	"github.com/linkerd/linkerd2-proxy-api/go/meta"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meridian-mesh/meridian/internal/metrics"
	"github.com/meridian-mesh/meridian/snapshot"
	"github.com/meridian-mesh/meridian/translator"
)

// The inputs and outputs of linkerd2's TestProfileTranslator
// (controller/api/destination/profile_translator_test.go): a profile of foo.bar, port 80.
var (
	getButNotPrivate   = &translator.RequestMatch{All: []*translator.RequestMatch{{Method: "GET"}, {Not: &translator.RequestMatch{PathRegex: "/private/.*"}}}}
	pbGetButNotPrivate = &pb.RequestMatch{Match: &pb.RequestMatch_All{All: &pb.RequestMatch_Seq{Matches: []*pb.RequestMatch{
		{Match: &pb.RequestMatch_Method{Method: &httppb.HttpMethod{Type: &httppb.HttpMethod_Registered_{Registered: httppb.HttpMethod_GET}}}},
		{Match: &pb.RequestMatch_Not{Not: &pb.RequestMatch{Match: &pb.RequestMatch_Path{Path: &pb.PathMatch{Regex: "/private/.*"}}}}},
	}}}}
	login              = &translator.RequestMatch{PathRegex: "/login"}
	pbLogin            = &pb.RequestMatch{Match: &pb.RequestMatch_Path{Path: &pb.PathMatch{Regex: "/login"}}}
	fiveXX             = &translator.ResponseMatch{Status: &translator.Range{Min: 500, Max: 599}}
	pbFiveXX           = &pb.ResponseMatch{Match: &pb.ResponseMatch_Status{Status: &pb.HttpStatusRange{Min: 500, Max: 599}}}
	fiveXXfourTwenty   = &translator.ResponseMatch{Any: []*translator.ResponseMatch{fiveXX, {Status: &translator.Range{Min: 420, Max: 420}}}}
	pbFiveXXfourTwenty = &pb.ResponseMatch{Match: &pb.ResponseMatch_Any{Any: &pb.ResponseMatch_Seq{Matches: []*pb.ResponseMatch{
		pbFiveXX, {Match: &pb.ResponseMatch_Status{Status: &pb.HttpStatusRange{Min: 420, Max: 420}}},
	}}}}
	route1   = &translator.RouteSpec{Name: "route1", Condition: getButNotPrivate, ResponseClasses: []*translator.ResponseClass{{Condition: fiveXX, IsFailure: true}}}
	pbRoute1 = &pb.Route{MetricsLabels: map[string]string{"route": "route1"}, Condition: pbGetButNotPrivate,
		ResponseClasses: []*pb.ResponseClass{{Condition: pbFiveXX, IsFailure: true}}}
	route2   = &translator.RouteSpec{Name: "route2", Condition: login, ResponseClasses: []*translator.ResponseClass{{Condition: fiveXXfourTwenty, IsFailure: true}}}
	pbRoute2 = &pb.Route{MetricsLabels: map[string]string{"route": "route2"}, Condition: pbLogin,
		ResponseClasses: []*pb.ResponseClass{{Condition: pbFiveXXfourTwenty, IsFailure: true}}}
	pbParentFoo        = &meta.Metadata{Kind: &meta.Metadata_Resource{Resource: &meta.Resource{Group: "core", Kind: "Service", Name: "foo", Namespace: "bar", Port: 80}}}
	pbProfileRef       = &meta.Metadata{Kind: &meta.Metadata_Resource{Resource: &meta.Resource{Group: "linkerd.io", Kind: "ServiceProfile", Name: "foo.bar.svc.cluster.local", Namespace: "bar"}}}
	defaultRetryBudget = &pb.RetryBudget{MinRetriesPerSecond: 10, RetryRatio: 0.2, Ttl: durationpb.New(10 * time.Second)}

	// The other routes TestProfileTranslator translates, as sent.
	pbGetMethod               = &pb.RequestMatch{Match: &pb.RequestMatch_Method{Method: &httppb.HttpMethod{Type: &httppb.HttpMethod_Registered_{Registered: httppb.HttpMethod_GET}}}}
	pbMultipleRequestMatches  = &pb.Route{MetricsLabels: map[string]string{"route": "multipleRequestMatches"}, Condition: &pb.RequestMatch{Match: &pb.RequestMatch_All{All: &pb.RequestMatch_Seq{Matches: []*pb.RequestMatch{pbGetMethod, {Match: &pb.RequestMatch_Path{Path: &pb.PathMatch{Regex: "/my/path"}}}}}}}}
	pbMultipleResponseMatches = &pb.Route{MetricsLabels: map[string]string{"route": "multipleResponseMatches"}, Condition: pbGetMethod,
		ResponseClasses: []*pb.ResponseClass{{Condition: &pb.ResponseMatch{Match: &pb.ResponseMatch_All{All: &pb.ResponseMatch_Seq{Matches: []*pb.ResponseMatch{
			{Match: &pb.ResponseMatch_Status{Status: &pb.HttpStatusRange{Min: 400, Max: 499}}},
			{Match: &pb.ResponseMatch_Not{Not: &pb.ResponseMatch{Match: &pb.ResponseMatch_Status{Status: &pb.HttpStatusRange{Min: 404}}}}},
		}}}}}}}
	pbOneSidedRange    = &pb.Route{MetricsLabels: map[string]string{"route": "r"}, Condition: pbGetMethod, ResponseClasses: []*pb.ResponseClass{{Condition: &pb.ResponseMatch{Match: &pb.ResponseMatch_Status{Status: &pb.HttpStatusRange{Min: 200}}}}}}
	pbRouteWithTimeout = &pb.Route{MetricsLabels: map[string]string{"route": "routeWithTimeout"}, Condition: pbLogin, Timeout: durationpb.New(200 * time.Millisecond)}
	// A retry budget other than the default: ratio 0.5, 3 a second, a minute.
	pbCustomBudget = &pb.RetryBudget{RetryRatio: 0.5, MinRetriesPerSecond: 3, Ttl: durationpb.New(time.Minute)}
)

// fooProfile is a ServiceProfile of foo.bar with the routes given, projected (and so checked).
func fooProfile(t *testing.T, routes ...*translator.RouteSpec) (*translator.ServiceProfile, error) {
	t.Helper()
	return translator.ProjectServiceProfile(&translator.ServiceProfileObject{
		TypeMeta:   metav1.TypeMeta{Kind: "ServiceProfile"},
		ObjectMeta: metav1.ObjectMeta{Name: "foo.bar.svc.cluster.local", Namespace: "bar"},
		Spec:       translator.ServiceProfileSpec{Routes: routes},
	})
}

// fooDestinationProfile is the profile GetProfile serves for foo.bar:80 with sp (nil: none).
func fooDestinationProfile(sp *translator.ServiceProfile) *pb.DestinationProfile {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "foo", Namespace: "bar"}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}
	p := buildProfile(DefaultConfig(), translator.Target{Service: "foo", Namespace: "bar", Port: 80}, svc, nil)
	if sp != nil {
		p = withServiceProfile(p, sp, 80)
	}
	return p
}

// TestProfileTranslation runs linkerd2's TestProfileTranslator cases.
func TestProfileTranslation(t *testing.T) {
	base := func(routes ...*pb.Route) *pb.DestinationProfile {
		return &pb.DestinationProfile{FullyQualifiedName: "foo.bar.svc.cluster.local", ParentRef: pbParentFoo, ProfileRef: pbProfileRef, Routes: routes, RetryBudget: defaultRetryBudget}
	}
	for _, tc := range []struct {
		name   string
		routes []*translator.RouteSpec
		want   *pb.DestinationProfile // nil: the profile is refused
	}{
		{"Sends update", []*translator.RouteSpec{route1, route2}, base(pbRoute1, pbRoute2)},
		{"Request match with more than one field becomes ALL",
			[]*translator.RouteSpec{{Name: "multipleRequestMatches", Condition: &translator.RequestMatch{Method: "GET", PathRegex: "/my/path"}}},
			base(pbMultipleRequestMatches)},
		{"Ignores request match without any fields", []*translator.RouteSpec{{Name: "r", Condition: &translator.RequestMatch{}}}, nil},
		{"Response match with more than one field becomes ALL",
			[]*translator.RouteSpec{{Name: "multipleResponseMatches", Condition: &translator.RequestMatch{Method: "GET"},
				ResponseClasses: []*translator.ResponseClass{{Condition: &translator.ResponseMatch{Status: &translator.Range{Min: 400, Max: 499}, Not: &translator.ResponseMatch{Status: &translator.Range{Min: 404}}}}}}},
			base(pbMultipleResponseMatches)},
		{"Ignores response match without any fields",
			[]*translator.RouteSpec{{Name: "r", Condition: &translator.RequestMatch{Method: "GET"}, ResponseClasses: []*translator.ResponseClass{{Condition: &translator.ResponseMatch{}}}}}, nil},
		{"Ignores response match with invalid status range",
			[]*translator.RouteSpec{{Name: "r", Condition: &translator.RequestMatch{Method: "GET"}, ResponseClasses: []*translator.ResponseClass{{Condition: &translator.ResponseMatch{Status: &translator.Range{Min: 201, Max: 200}}}}}}, nil},
		{"Sends update for one sided status range",
			[]*translator.RouteSpec{{Name: "r", Condition: &translator.RequestMatch{Method: "GET"}, ResponseClasses: []*translator.ResponseClass{{Condition: &translator.ResponseMatch{Status: &translator.Range{Min: 200}}}}}},
			base(pbOneSidedRange)},
		{"Sends update with custom timeout",
			[]*translator.RouteSpec{{Name: "routeWithTimeout", Condition: login, ResponseClasses: []*translator.ResponseClass{}, Timeout: "200ms"}},
			base(pbRouteWithTimeout)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sp, err := fooProfile(t, tc.routes...)
			if tc.want == nil {
				// Linkerd sends nothing for a profile it cannot translate; Meridian refuses it
				// when it is read (and serves the last good one, or none).
				if err == nil || sp.Problem == "" {
					t.Fatalf("profile accepted: %+v", sp)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := fooDestinationProfile(sp); !proto.Equal(got, tc.want) {
				t.Fatalf("profile\n got %v\nwant %v", got, tc.want)
			}
		})
	}
	// "Sends empty update": without a profile, the default one (with the Service as parent).
	want := &pb.DestinationProfile{FullyQualifiedName: "foo.bar.svc.cluster.local", ParentRef: pbParentFoo, RetryBudget: defaultRetryBudget}
	if got := fooDestinationProfile(nil); !proto.Equal(got, want) {
		t.Fatalf("default profile\n got %v\nwant %v", got, want)
	}
}

// TestProfileRetryBudgetAndDstOverrides checks what the profile translator gives a profile's
// retry budget and dstOverrides: the budget as written, an override's weight in
// ten-thousandths and its authority with the port asked for when it has none.
func TestProfileRetryBudgetAndDstOverrides(t *testing.T) {
	sp, err := translator.ProjectServiceProfile(&translator.ServiceProfileObject{
		ObjectMeta: metav1.ObjectMeta{Name: "foo.bar.svc.cluster.local", Namespace: "bar"},
		Spec: translator.ServiceProfileSpec{
			RetryBudget: &translator.RetryBudget{RetryRatio: 0.5, MinRetriesPerSecond: 3, TTL: "1m"},
			DstOverrides: []*translator.WeightedDst{
				{Authority: "foo-v1.bar.svc.cluster.local", Weight: resource.MustParse("900m")},
				{Authority: "foo-v2.bar.svc.cluster.local:8080", Weight: resource.MustParse("100m")},
			},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	got := fooDestinationProfile(sp)
	wantDsts := []*pb.WeightedDst{{Authority: "foo-v1.bar.svc.cluster.local:80", Weight: 9000}, {Authority: "foo-v2.bar.svc.cluster.local:8080", Weight: 1000}}
	if !proto.Equal(got.GetRetryBudget(), pbCustomBudget) || len(got.GetDstOverrides()) != 2 ||
		!proto.Equal(got.GetDstOverrides()[0], wantDsts[0]) || !proto.Equal(got.GetDstOverrides()[1], wantDsts[1]) {
		t.Fatalf("budget %v, overrides %v", got.GetRetryBudget(), got.GetDstOverrides())
	}
}

// spManifest is a ServiceProfile of name1.ns (mycluster.local) in namespace ns with one route.
func spManifest(ns, route string) string {
	return fmt.Sprintf("apiVersion: linkerd.io/v1alpha2\nkind: ServiceProfile\nmetadata: {name: name1.ns.svc.mycluster.local, namespace: %s}\nspec:\n  routes:\n  - name: %s\n    condition: {pathRegex: /%s}\n", ns, route, route)
}

// routeOf returns the one route's name of a profile ("" for none).
func routeOf(t *testing.T, p *pb.DestinationProfile) string {
	t.Helper()
	switch r := p.GetRoutes(); len(r) {
	case 0:
		return ""
	case 1:
		return r[0].GetMetricsLabels()["route"]
	default:
		t.Fatalf("routes %v", r)
	}
	return ""
}

// TestProfileUpdates follows linkerd2's TestFallbackProfileListener
// (controller/api/destination/fallback_profile_listener_test.go) over gRPC: a client
// namespace's profile overrides the Service namespace's, a change of the one that applies is
// sent, one of the other is not, and each falls back when the other goes ("Fallback to
// backup", "Backup cleared", "Primary overrides backup").
func TestProfileUpdates(t *testing.T) {
	e := newDirEnv(t, parityConfig(), "linkerd")
	removeDoc(t, e, "profiles.yaml", "kind: ServiceProfile", "name: name1.ns.svc.mycluster.local") // both of name1's
	e.write("sp-ns.yaml", spManifest("ns", "backup"))
	e.write("sp-client.yaml", spManifest("client-ns", "primary"))
	path := fmt.Sprintf("%s:%d", l5dFQN, l5dPort)
	client := e.profile(path, `{"ns":"client-ns"}`)
	for p := client.next(t); routeOf(t, p) != "primary"; p = client.next(t) {
	}
	// The directory's change reaches the index one object at a time (and may come in two
	// batches, the rewritten profiles.yaml first), so a client that opens its stream before
	// ns's new profile is in may first get ns's old one (route1) or none, and then backup.
	other := e.profile(path, `{"ns":"other"}`)
	for p := other.next(t); routeOf(t, p) != "backup"; p = other.next(t) {
		if r := routeOf(t, p); r != "route1" && r != "" {
			t.Fatalf("another client: %v", p)
		}
	}
	// A change of the Service namespace's profile: the other client gets it, not this one.
	e.write("sp-ns.yaml", spManifest("ns", "backup2"))
	if p := other.next(t); routeOf(t, p) != "backup2" {
		t.Fatalf("another client after the change: %v", p)
	}
	client.quiet(t, 300*time.Millisecond)
	steps := []struct {
		do   func()
		want string
	}{
		{func() { e.write("sp-client.yaml", spManifest("client-ns", "primary2")) }, "primary2"},
		{func() { e.write("sp-client.yaml", "") }, "backup2"},                                   // Fallback to backup
		{func() { e.write("sp-ns.yaml", "") }, ""},                                              // Backup cleared
		{func() { e.write("sp-client.yaml", spManifest("client-ns", "primary3")) }, "primary3"}, // Primary overrides backup
	}
	for i, s := range steps {
		s.do()
		if p := client.next(t); routeOf(t, p) != s.want || p.GetFullyQualifiedName() != l5dFQN {
			t.Fatalf("step %d: %v, want route %q", i, p, s.want)
		}
	}
	// An invalid profile keeps the last good one in effect.
	e.write("sp-client.yaml", strings.Replace(spManifest("client-ns", "primary4"), "condition: {pathRegex: /primary4}", "condition: {}", 1))
	client.quiet(t, 500*time.Millisecond)
}

// TestProfileLastGood checks the index's choice of profile: the client namespace's, else the
// Service namespace's; an invalid update (the Kubernetes source delivers it with its
// Problem) leaves the last good version in effect, and an invalid first version is none.
func TestProfileLastGood(t *testing.T) {
	x := NewIndex(DefaultConfig(), snapshot.NewStore(snapshot.StoreConfig{}), nil, newMetrics(metrics.Exclusive(nil)), zap.NewNop())
	mk := func(ns, route, problem string) *translator.ServiceProfile {
		return &translator.ServiceProfile{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web.shop.svc.cluster.local"},
			Spec: translator.ServiceProfileSpec{Routes: []*translator.RouteSpec{{Name: route}}}, Problem: problem}
	}
	k := NewServiceKey("shop", "web")
	routeFor := func(clientNS string) string {
		if sp := x.Profile(k, clientNS); sp != nil {
			return sp.Spec.Routes[0].Name
		}
		return ""
	}
	x.OnServiceProfile(mk("shop", "backup", ""), false)
	x.OnServiceProfile(mk("client", "bad", "invalid"), false)
	if got := routeFor("client"); got != "backup" {
		t.Fatalf("an invalid first client profile: route %q, want the Service namespace's", got)
	}
	x.OnServiceProfile(mk("client", "primary", ""), false)
	x.OnServiceProfile(mk("client", "bad", "invalid"), false)
	if got := routeFor("client"); got != "primary" {
		t.Fatalf("after an invalid update: route %q, want the last good one", got)
	}
	x.OnServiceProfile(mk("client", "", ""), true)
	if got, other := routeFor("client"), routeFor(""); got != "backup" || other != "backup" {
		t.Fatalf("after the client profile's deletion: %q and %q, want the Service namespace's", got, other)
	}
	x.OnServiceProfile(&translator.ServiceProfile{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "not-a-service-name"}}, false)
	x.SetOwns(func(ServiceKey) bool { return false })
	x.OnServiceProfile(mk("shop", "unowned", ""), false)
	if got := routeFor(""); got != "backup" {
		t.Fatalf("a profile of a service not owned changed the profile: %q", got)
	}
}

// TestHostnameProfileOpaqueFromThePod: a pod's DNS name is opaque as its endpoint's hint says
// (the pod's opaque ports), not as its Service's port is (linkerd2's endpoint profile
// translator); without a hint, the Service's rule applies.
func TestHostnameProfileOpaqueFromThePod(t *testing.T) {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "ns"}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 9000}}}}
	target := translator.Target{Service: "db", Namespace: "ns", Port: 9000, Hostname: "db-0"}
	opaque := &pb.WeightedAddr{ProtocolHint: &pb.ProtocolHint{Protocol: &pb.ProtocolHint_Opaque_{Opaque: &pb.ProtocolHint_Opaque{}}}}
	h2 := &pb.WeightedAddr{ProtocolHint: &pb.ProtocolHint{Protocol: &pb.ProtocolHint_H2_{H2: &pb.ProtocolHint_H2{}}}}
	if p := buildProfile(DefaultConfig(), target, svc, opaque); !p.GetOpaqueProtocol() {
		t.Error("a pod whose port is opaque: the profile is not")
	}
	if p := buildProfile(DefaultConfig(), target, svc, h2); p.GetOpaqueProtocol() {
		t.Error("a pod whose port is HTTP/2: the profile is opaque")
	}
}

// translationProfile is a ServiceProfile of name1.ns with the routes of linkerd2's
// TestProfileTranslator that it translates ("Sends update", "Request match with more than one
// field becomes ALL", "Response match with more than one field becomes ALL", "Sends update
// for one sided status range", "Sends update with custom timeout"), a retry budget and
// dstOverrides, as a user writes them.
const translationProfile = `apiVersion: linkerd.io/v1alpha2
kind: ServiceProfile
metadata: {name: name1.ns.svc.mycluster.local, namespace: ns}
spec:
  routes:
  - name: route1
    condition: {all: [{method: GET}, {not: {pathRegex: "/private/.*"}}]}
    responseClasses: [{condition: {status: {min: 500, max: 599}}, isFailure: true}]
  - name: route2
    condition: {pathRegex: /login}
    responseClasses: [{condition: {any: [{status: {min: 500, max: 599}}, {status: {min: 420, max: 420}}]}, isFailure: true}]
  - name: multipleRequestMatches
    condition: {method: GET, pathRegex: /my/path}
  - name: multipleResponseMatches
    condition: {method: GET}
    responseClasses: [{condition: {status: {min: 400, max: 499}, not: {status: {min: 404}}}}]
  - name: r
    condition: {method: GET}
    responseClasses: [{condition: {status: {min: 200}}}]
  - name: routeWithTimeout
    condition: {pathRegex: /login}
    timeout: 200ms
  retryBudget: {retryRatio: 0.5, minRetriesPerSecond: 3, ttl: 1m}
  dstOverrides:
  - {authority: name1-v1.ns.svc.mycluster.local, weight: 900m}
  - {authority: "name1-v2.ns.svc.mycluster.local:8080", weight: 100m}
`

// TestProfileTranslationOverGRPC serves translationProfile through a replica's GetProfile: the
// routes arrive as TestProfileTranslation expects them of the translator (linkerd2's
// TestProfileTranslator), with the profile's retry budget, and its dstOverrides with their
// weights in ten-thousandths and the port asked for where the authority has none.
func TestProfileTranslationOverGRPC(t *testing.T) {
	e := newDirEnv(t, parityConfig(), "linkerd")
	removeDoc(t, e, "profiles.yaml", "kind: ServiceProfile", "name: name1.ns.svc.mycluster.local")
	e.write("sp.yaml", translationProfile)
	want := &pb.DestinationProfile{
		Routes:      []*pb.Route{pbRoute1, pbRoute2, pbMultipleRequestMatches, pbMultipleResponseMatches, pbOneSidedRange, pbRouteWithTimeout},
		RetryBudget: pbCustomBudget,
		DstOverrides: []*pb.WeightedDst{
			{Authority: fmt.Sprintf("name1-v1.ns.svc.mycluster.local:%d", l5dPort), Weight: 9000},
			{Authority: "name1-v2.ns.svc.mycluster.local:8080", Weight: 1000},
		},
	}
	s := e.profile(fmt.Sprintf("%s:%d", l5dFQN, l5dPort), "")
	var got *pb.DestinationProfile
	for got = s.next(t); len(got.GetRoutes()) < 2; got = s.next(t) { // the fixture's profile had one route
	}
	part := &pb.DestinationProfile{Routes: got.GetRoutes(), RetryBudget: got.GetRetryBudget(), DstOverrides: got.GetDstOverrides()}
	if !proto.Equal(part, want) {
		t.Fatalf("profile\n got %v\nwant %v", part, want)
	}
	if got.GetFullyQualifiedName() != l5dFQN || got.GetProfileRef().GetResource().GetKind() != "ServiceProfile" {
		t.Fatalf("profile %v: want name1's, from its ServiceProfile", got)
	}
}
