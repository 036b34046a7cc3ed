package source

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata"

	"github.com/meridian-mesh/meridian/internal/kubetest"
	"github.com/meridian-mesh/meridian/internal/testutil"
	"github.com/meridian-mesh/meridian/translator"
)

var serverResource = schema.GroupVersionResource{Group: "policy.linkerd.io", Version: "v1beta3", Resource: "servers"}

// startAllKinds runs a Kubernetes source on ns of env's API server with all its clients
// (typed, dynamic for Servers and ServiceProfiles, metadata for Nodes), delivering to h, and
// waits until it has synced.
func startAllKinds(t *testing.T, env *kubetest.Env, ns string, h Handler) *Kubernetes {
	t.Helper()
	md, err := metadata.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	src := NewKubernetesFrom(KubernetesClients{Typed: env.Client, Dynamic: env.Dynamic, Metadata: md}, KubernetesConfig{Namespace: ns}, prometheus.NewRegistry(), zaptest.NewLogger(t))
	testutil.Go(t, "Run", func(ctx context.Context) error { return src.Run(ctx, h) })
	testutil.Eventually(t, apiTimeout, "informers to sync", src.Synced)
	return src
}

// TestKubernetesNodesAndServers runs the Kubernetes source with the metadata and dynamic
// clients on the real API server: Nodes arrive as metadata projected to their name and zone,
// Servers as translator's projection (a Server the schema admits but whose selector does not
// parse arrives with its Problem), both are replayed, and deletions are delivered.
func TestKubernetesNodesAndServers(t *testing.T) {
	env := kubetest.Start(t)
	ns := env.Namespace(t, nil)
	ctx := apiCtx(t)
	nodeName := "n-" + ns
	if _, err := env.Client.CoreV1().Nodes().Create(ctx, &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: nodeName, Labels: map[string]string{corev1.LabelTopologyZone: "z1", "big": strings.Repeat("x", 60)},
			Annotations: map[string]string{"node.alpha.kubernetes.io/ttl": "0"}},
		Spec: corev1.NodeSpec{PodCIDR: "10.244.0.0/24"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.CoreV1().Nodes().Delete(context.Background(), nodeName, metav1.DeleteOptions{}) })
	servers := env.Dynamic.Resource(serverResource).Namespace(ns)
	for name, sel := range map[string]map[string]any{
		"web":   {"matchLabels": map[string]any{"app": "web"}},
		"bogus": {"matchExpressions": []any{map[string]any{"key": "app", "operator": "In"}}}, // In needs values
	} {
		if _, err := servers.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "policy.linkerd.io/v1beta3", "kind": "Server",
			"metadata": map[string]any{"name": name, "namespace": ns, "annotations": map[string]any{"dropped": "yes"}},
			"spec":     map[string]any{"podSelector": sel, "port": "http", "proxyProtocol": "opaque"},
		}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	rec := newRecorder()
	src := startAllKinds(t, env, ns, rec)
	testutil.Eventually(t, apiTimeout, "the Node and the Servers", func() bool {
		return rec.get(KindNode+" /"+nodeName) != nil && rec.get(KindServer+" "+ns+"/web") != nil && rec.get(KindServer+" "+ns+"/bogus") != nil
	})
	n := rec.get(KindNode + " /" + nodeName).(*metav1.PartialObjectMetadata)
	if !translator.IsSlimNode(n) || translator.NodeZone(n) != "z1" || n.Labels["big"] != "" || n.Annotations != nil {
		t.Errorf("node after transform: %+v", n)
	}
	web := rec.get(KindServer + " " + ns + "/web").(*translator.Server)
	api := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Labels: map[string]string{"app": "web"}}}
	api.Spec.Containers = []corev1.Container{{Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}}}
	pod := translator.SlimPod(api)
	if !web.Selects(pod, 8080) || web.Problem != "" || web.Annotations != nil || web.ProxyProtocol != "opaque" {
		t.Errorf("server after transform: %+v", web)
	}
	if bogus := rec.get(KindServer + " " + ns + "/bogus").(*translator.Server); bogus.Problem == "" || bogus.Selects(pod, 8080) {
		t.Errorf("invalid server after transform: %+v", bogus)
	}
	rec.Take()
	if err := src.Replay(ctx); err != nil {
		t.Fatal(err)
	}
	replayed := strings.Join(rec.Take(), ",")
	for _, k := range []string{"+Node /" + nodeName, "+Server " + ns + "/web"} {
		if !strings.Contains(replayed, k) {
			t.Errorf("Replay did not deliver %s: %s", k, replayed)
		}
	}
	if err := servers.Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, apiTimeout, "the Server's deletion", func() bool { return rec.get(KindServer+" "+ns+"/web") == nil })
}

var profileResource = schema.GroupVersionResource{Group: "linkerd.io", Version: "v1alpha2", Resource: "serviceprofiles"}

// profileObject is a ServiceProfile named name in ns with one route whose condition is cond.
func profileObject(ns, name, route string, cond map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "linkerd.io/v1alpha2", "kind": "ServiceProfile",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec":     map[string]any{"routes": []any{map[string]any{"name": route, "condition": cond}}},
	}}
}

// TestKubernetesServiceProfiles runs the Kubernetes source on the real API server with a
// handler that wants some ServiceProfiles only: those are read whole and delivered (updates,
// an update the sp-validator would refuse, with its Problem, and deletions); the others are
// never read; when the handler starts wanting another, Replay reads and delivers it.
func TestKubernetesServiceProfiles(t *testing.T) {
	env := kubetest.Start(t)
	ns := env.Namespace(t, nil)
	ctx := apiCtx(t)
	sps := env.Dynamic.Resource(profileResource).Namespace(ns)
	wanted, other := "web."+ns+".svc.cluster.local", "db."+ns+".svc.cluster.local"
	for _, name := range []string{wanted, other} {
		if _, err := sps.Create(ctx, profileObject(ns, name, "r1", map[string]any{"pathRegex": "/a"}), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	rec := &profileRecorder{recorder: newRecorder()}
	wantWeb := func(name string) bool { return name == wanted }
	rec.want.Store(&wantWeb)
	src := startAllKinds(t, env, ns, rec)
	// Synced waits for the profiles listed to be read.
	routeOf := func(name string) string {
		p, _ := rec.get(KindServiceProfile + " " + ns + "/" + name).(*translator.ServiceProfile)
		if p == nil || len(p.Spec.Routes) != 1 || p.Problem != "" {
			return ""
		}
		return p.Spec.Routes[0].Name
	}
	if got := routeOf(wanted); got != "r1" {
		t.Fatalf("the wanted profile after sync: route %q", got)
	}
	if rec.get(KindServiceProfile+" "+ns+"/"+other) != nil {
		t.Fatal("a profile the handler does not want was delivered")
	}
	update := func(name, route string, cond map[string]any) {
		t.Helper()
		cur, err := sps.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cur.Object["spec"] = profileObject(ns, name, route, cond).Object["spec"]
		if _, err := sps.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	update(wanted, "r2", map[string]any{"method": "GET"})
	testutil.Eventually(t, apiTimeout, "the update", func() bool { return routeOf(wanted) == "r2" })
	// The schema admits an empty condition; the sp-validator's checks do not.
	update(wanted, "r3", map[string]any{})
	testutil.Eventually(t, apiTimeout, "the invalid update, with its problem", func() bool {
		p, _ := rec.get(KindServiceProfile + " " + ns + "/" + wanted).(*translator.ServiceProfile)
		return p != nil && strings.Contains(p.Problem, "A request match must have a field set")
	})
	// Now both are wanted: Replay reads the other.
	wantBoth := func(name string) bool { return name == wanted || name == other }
	rec.want.Store(&wantBoth)
	if err := src.Replay(ctx); err != nil {
		t.Fatal(err)
	}
	if got := routeOf(other); got != "r1" {
		t.Fatalf("the other profile after Replay: route %q", got)
	}
	if err := sps.Delete(ctx, wanted, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, apiTimeout, "the deletion", func() bool { return rec.get(KindServiceProfile+" "+ns+"/"+wanted) == nil })
}
