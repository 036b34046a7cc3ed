package shard

import (
	"context"
	"fmt"
	"testing"
	"time"

	pb "github.com/linkerd/linkerd2-proxy-api/go/destination"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata"

	"github.com/meridian-mesh/meridian/internal/kubetest"
	"github.com/meridian-mesh/meridian/internal/testutil"
	"github.com/meridian-mesh/meridian/shard/source"
)

var serversResource = schema.GroupVersionResource{Group: "policy.linkerd.io", Version: "v1beta3", Resource: "servers"}

// serverObject is a policy.linkerd.io/v1beta3 Server selecting app=<app> on port with
// proxyProtocol opaque.
func serverObject(ns, name, app string, port int64) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "policy.linkerd.io/v1beta3", "kind": "Server",
		"metadata": map[string]any{"namespace": ns, "name": name},
		"spec": map[string]any{
			"podSelector":   map[string]any{"matchLabels": map[string]any{"app": app}},
			"port":          port,
			"proxyProtocol": "opaque",
		},
	}}
}

// startKubeReplica starts a replica (startReplica) on a Kubernetes source of env's API
// server configured by cfg: with all its clients (typed, dynamic for Servers and
// ServiceProfiles, metadata for Nodes) when all, else the typed one only. It returns the
// replica, a client of it and the registry of its metrics.
func startKubeReplica(t *testing.T, env *kubetest.Env, cfg source.KubernetesConfig, all bool) (*Replica, pb.DestinationClient, *prometheus.Registry) {
	t.Helper()
	clients := source.KubernetesClients{Typed: env.Client}
	if all {
		md, err := metadata.NewForConfig(env.Config)
		if err != nil {
			t.Fatal(err)
		}
		clients.Dynamic, clients.Metadata = env.Dynamic, md
	}
	reg := prometheus.NewRegistry()
	log := zaptest.NewLogger(t)
	src := source.NewKubernetesFrom(clients, cfg, reg, log)
	r, client := startReplica(t, DefaultConfig(), Deps{Source: src, Registerer: reg, Logger: log}, 60*time.Second)
	if w := src.Warnings(); len(w) > 0 {
		t.Fatalf("source warnings: %v", w)
	}
	return r, client, reg
}

// TestKubernetesZonesIPsServers runs a replica on the Kubernetes source of a real API server,
// with the Node (metadata only) and Server informers, and checks over gRPC what they drive:
// zone_locality against the client's node, GetProfile by cluster IP and by pod IP, and a
// Server that makes a port opaque, then no longer selects the pod.
func TestKubernetesZonesIPsServers(t *testing.T) {
	env := kubetest.Start(t)
	ns := env.Namespace(t, nil)
	cs := env.Client
	nodeName := "zone-node-" + ns
	if _, err := cs.CoreV1().Nodes().Create(api(t), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName,
		Labels: map[string]string{corev1.LabelTopologyZone: "west-1a", "other": "dropped"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.CoreV1().Nodes().Delete(context.Background(), nodeName, metav1.DeleteOptions{}) })
	r, client, reg := startKubeReplica(t, env, source.KubernetesConfig{Namespace: ns}, true)

	slice := createWeb(t, cs, ns)
	slice.Endpoints[0].Zone, slice.Endpoints[1].Zone = ptr("west-1a"), ptr("west-1b")
	if _, err := cs.DiscoveryV1().EndpointSlices(ns).Update(api(t), slice, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	for i, name := range []string{"web-1", "web-2"} {
		p, err := cs.CoreV1().Pods(ns).Get(api(t), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		p.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: fmt.Sprintf("10.7.0.%d", i+1), PodIPs: []corev1.PodIP{{IP: fmt.Sprintf("10.7.0.%d", i+1)}}}
		if _, err := cs.CoreV1().Pods(ns).UpdateStatus(api(t), p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	svc, err := cs.CoreV1().Services(ns).Get(api(t), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, "the Node's zone", func() bool { return r.Index().cluster.zone(nodeName) == "west-1a" })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// Zones against the client's node.
	gs, err := client.Get(ctx, &pb.GetDestination{Path: "web." + ns + ".svc.cluster.local:80", ContextToken: fmt.Sprintf(`{"ns":%q,"nodeName":%q}`, ns, nodeName)})
	if err != nil {
		t.Fatal(err)
	}
	s := newStream(gs)
	var v held
	s.converge(t, &v, "zones", "10.7.0.1:8080", "10.7.0.2:8080")
	testutil.Eventually(t, 30*time.Second, "zone_locality local and remote", func() bool {
		for len(s.c) > 0 {
			v.apply(t, <-s.c)
		}
		return v.addrs[netipMust("10.7.0.1:8080")].GetMetricLabels()["zone_locality"] == "local" &&
			v.addrs[netipMust("10.7.0.2:8080")].GetMetricLabels()["zone_locality"] == "remote"
	})

	// GetProfile by cluster IP, and by pod IP.
	if p := recvProfile(t, ctx, client, svc.Spec.ClusterIP+":80"); p.GetFullyQualifiedName() != "web."+ns+".svc.cluster.local" {
		t.Fatalf("profile of the cluster IP %s: %v", svc.Spec.ClusterIP, p)
	}
	ps := newRecvStream(mustProfile(t, ctx, client, "10.7.0.1:8080"))
	if p := ps.next(t); p.GetEndpoint().GetMetricLabels()["pod"] != "web-1" || p.GetOpaqueProtocol() {
		t.Fatalf("profile of web-1's IP: %v", p)
	}

	// A Server makes 8080 of the app=web pods opaque; a change of its protocol, then of its
	// selector (to select nothing), is sent.
	srv, err := env.Dynamic.Resource(serversResource).Namespace(ns).Create(api(t), serverObject(ns, "web-http", "web", 8080), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for p := ps.next(t); !p.GetOpaqueProtocol(); p = ps.next(t) {
	}
	for _, step := range []struct {
		value  string
		field  []string
		opaque bool
	}{
		{"HTTP/1", []string{"spec", "proxyProtocol"}, false},
		{"opaque", []string{"spec", "proxyProtocol"}, true},
		{"nothing", []string{"spec", "podSelector", "matchLabels", "app"}, false},
	} {
		if err := unstructured.SetNestedField(srv.Object, step.value, step.field...); err != nil {
			t.Fatal(err)
		}
		if srv, err = env.Dynamic.Resource(serversResource).Namespace(ns).Update(api(t), srv, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		for p := ps.next(t); p.GetOpaqueProtocol() != step.opaque; p = ps.next(t) {
		}
	}
	if n := testutil.HistogramSamples(t, reg, "servers_informer_lag_seconds"); n == 0 {
		t.Error("no Server informer lag observed")
	}
}

var profilesResource = schema.GroupVersionResource{Group: "linkerd.io", Version: "v1alpha2", Resource: "serviceprofiles"}

// spObject is a ServiceProfile of web.<svcNS> in ns with one route (an empty condition when
// route is "").
func spObject(ns, svcNS, route string) *unstructured.Unstructured {
	cond := map[string]any{}
	if route != "" {
		cond["pathRegex"] = "/" + route
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "linkerd.io/v1alpha2", "kind": "ServiceProfile",
		"metadata": map[string]any{"name": "web." + svcNS + ".svc.cluster.local", "namespace": ns},
		"spec":     map[string]any{"routes": []any{map[string]any{"name": "r", "condition": cond}}},
	}}
}

// TestKubernetesServiceProfiles runs a replica on the Kubernetes source of a real API server
// and follows a GetProfile stream of a client in another namespace (the cases of linkerd2's
// TestGetProfiles "Returns client profile" and TestFallbackProfileListener): the client
// namespace's profile applies, the Service namespace's once it is deleted, and an update the
// sp-validator would refuse leaves the last good profile in effect.
func TestKubernetesServiceProfiles(t *testing.T) {
	env := kubetest.Start(t)
	ns, clientNS := env.Namespace(t, nil), env.Namespace(t, nil)
	r, client, _ := startKubeReplica(t, env, source.DefaultKubernetesConfig(), true)
	createWeb(t, env.Client, ns)
	waitService(t, r, ns, "web")
	for _, o := range []*unstructured.Unstructured{spObject(ns, ns, "backup"), spObject(clientNS, ns, "primary")} {
		if _, err := env.Dynamic.Resource(profilesResource).Namespace(o.GetNamespace()).Create(api(t), o, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := client.GetProfile(ctx, &pb.GetDestination{Path: "web." + ns + ".svc.cluster.local:80", ContextToken: fmt.Sprintf(`{"ns":%q}`, clientNS)})
	if err != nil {
		t.Fatal(err)
	}
	ps := newRecvStream(s)
	route := func(p *pb.DestinationProfile) string {
		if len(p.GetRoutes()) != 1 {
			return ""
		}
		return p.GetRoutes()[0].GetCondition().GetPath().GetRegex()
	}
	for p := ps.next(t); route(p) != "/primary"; p = ps.next(t) {
	}
	// The two profiles reach the replica independently: the client namespace's may be served
	// before the Service namespace's is indexed. The fallback is what this test is about, so
	// it waits for both (a client without a profile for its namespace gets the Service's).
	testutil.Eventually(t, 30*time.Second, "the Service namespace's profile indexed", func() bool {
		return r.Index().Profile(NewServiceKey(ns, "web"), "") != nil
	})
	if err := env.Dynamic.Resource(profilesResource).Namespace(clientNS).Delete(api(t), "web."+ns+".svc.cluster.local", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if p := ps.next(t); route(p) != "/backup" {
		t.Fatalf("after the client's profile went: %v", p)
	}
	cur, err := env.Dynamic.Resource(profilesResource).Namespace(ns).Get(api(t), "web."+ns+".svc.cluster.local", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur.Object["spec"] = spObject(ns, ns, "").Object["spec"]
	if _, err := env.Dynamic.Resource(profilesResource).Namespace(ns).Update(api(t), cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	ps.quiet(t, time.Second)
}

// TestKubernetesMirror runs a replica on the Kubernetes source of a real API server with a
// multicluster mirror's Service and EndpointSlice (the inputs of linkerd2's
// TestEndpointsWatcherServiceMirrors): the gateway endpoint carries the identity and
// authority of the slice's annotations, and the endpoint is sent again when the identity
// changes.
func TestKubernetesMirror(t *testing.T) {
	env := kubetest.Start(t)
	ns := env.Namespace(t, nil)
	cs := env.Client
	r, client, _ := startKubeReplica(t, env, source.KubernetesConfig{Namespace: ns}, false)
	if _, err := cs.CoreV1().Services(ns).Create(api(t), &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "name1-remote"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 8989}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	slice, err := cs.DiscoveryV1().EndpointSlices(ns).Create(api(t), &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "name1-remote-xxxx",
			Labels:      map[string]string{discoveryv1.LabelServiceName: "name1-remote", "mirror.linkerd.io/mirrored-service": "true"},
			Annotations: map[string]string{"mirror.linkerd.io/remote-gateway-identity": "gateway-identity-1", "mirror.linkerd.io/remote-svc-fq-name": "name1-remote-fq"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Port: ptr(int32(8989))}},
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"172.17.0.12"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitService(t, r, ns, "name1-remote")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	gs, err := client.Get(ctx, &pb.GetDestination{Path: "name1-remote." + ns + ".svc.cluster.local:8989"})
	if err != nil {
		t.Fatal(err)
	}
	s := newRecvStream(gs)
	u := s.next(t)
	for kind(u) != "add" {
		u = s.next(t)
	}
	if got, h2 := gateway(t, u); got != "172.17.0.12:8989/gateway-identity-1/name1-remote-fq:8989" || !h2 {
		t.Fatalf("gateway endpoint %s (h2 %v)", got, h2)
	}
	slice.Annotations["mirror.linkerd.io/remote-gateway-identity"] = "gateway-identity-2"
	if _, err := cs.DiscoveryV1().EndpointSlices(ns).Update(api(t), slice, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got, _ := gateway(t, s.next(t)); got != "172.17.0.12:8989/gateway-identity-2/name1-remote-fq:8989" {
		t.Fatalf("after the identity changed: %s", got)
	}
}
