package policy

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/meridian-mesh/meridian/internal/kubetest"
	tutil "github.com/meridian-mesh/meridian/internal/testutil"
	"github.com/meridian-mesh/meridian/policy/api"
	"github.com/meridian-mesh/meridian/policy/compute"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap/zaptest"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"
)

func TestMain(m *testing.M) { os.Exit(tutil.Main(m, kubetest.Main)) }

// createAll creates the manifests of docs in namespace ns through the dynamic client.
func createAll(t *testing.T, env *kubetest.Env, ns string, docs string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	for _, doc := range strings.Split(docs, "\n---\n") {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil || u.Object == nil {
			continue
		}
		if u.GetKind() == "Service" {
			continue
		}
		u.SetNamespace(ns)
		gvr := api.Resources[api.Kind(u.GetKind())]
		switch u.GetKind() {
		case "Pod":
			gvr.Group, gvr.Version, gvr.Resource = "", "v1", "pods"
		case "ServiceAccount":
			gvr.Group, gvr.Version, gvr.Resource = "", "v1", "serviceaccounts"
		}
		if _, err := env.Dynamic.Resource(gvr).Namespace(ns).Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create %s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
}

// TestKubeSource runs the Kubernetes source against a real API server: the seed example is
// indexed, policy edits and deletions flow through, an update that the schema accepts but
// conversion rejects is counted and leaves the last good version in effect, such an object
// created so is counted and treated as absent, and the informers recover from an API
// server restart.
func TestKubeSource(t *testing.T) {
	env := kubetest.Start(t)
	ns := env.Namespace(t, nil)
	// No controller-manager runs here: create the pods' ServiceAccounts ourselves.
	createAll(t, env, ns, "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: web}\n---\napiVersion: v1\nkind: ServiceAccount\nmetadata: {name: api-gateway}")
	createAll(t, env, ns, strings.ReplaceAll(readTestdata(t, "pods.yaml")+"\n---\n"+readTestdata(t, "policy.yaml"), "namespace: shop", "namespace: "+ns))

	log := zaptest.NewLogger(t)
	reg := prometheus.NewRegistry()
	metrics := NewMetrics(reg)
	cfg := compute.DefaultConfig()
	idx := NewIndex(&cfg, log, metrics)
	src := NewKubeSource(env.Client, env.Dynamic, reg, log, metrics)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- src.Run(ctx, idx) }()
	defer func() {
		cancel()
		if err := tutil.Recv(t, done, wait, "KubeSource.Run to return"); err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	eventually(t, "informers to sync", src.Synced)

	web := compute.Key{Namespace: ns, Name: "web-0"}
	idsOf := func() []string {
		res, err := idx.Lookup(web, 8080)
		if err != nil {
			return []string{err.Error()}
		}
		return identities(res.Server)
	}
	gateway := "web-from-gateway=api-gateway." + ns + ".serviceaccount.identity.linkerd.cluster.local"
	eventually(t, "the seed policy", func() bool { return slices.Equal(idsOf(), []string{gateway}) })

	w, err := idx.watch(web)
	if err != nil {
		t.Fatal(err)
	}
	defer idx.unwatch(w)

	// Edit the policy through the API.
	apRes := env.Dynamic.Resource(api.Resources[api.KindAuthorizationPolicy]).Namespace(ns)
	rctx, rcancel := context.WithTimeout(context.Background(), wait)
	defer rcancel()
	ap, err := apRes.Get(rctx, "web-from-gateway", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_ = unstructured.SetNestedSlice(ap.Object, []any{map[string]any{"kind": "ServiceAccount", "name": "edge"}}, "spec", "requiredAuthenticationRefs")
	if _, err := apRes.Update(rctx, ap, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-w.wake:
	case <-time.After(wait):
		t.Fatal("the watcher was not woken by the policy edit")
	}
	edge := "web-from-gateway=edge." + ns + ".serviceaccount.identity.linkerd.cluster.local"
	eventually(t, "the edited policy", func() bool { return slices.Equal(idsOf(), []string{edge}) })

	invalidUpdateKeepsLastGood(t, apRes, src, metrics, idsOf, []string{edge})
	eventually(t, "the fixed policy", func() bool { return slices.Equal(idsOf(), []string{gateway}) })
	invalid := metrics.invalid.WithLabelValues(string(api.KindAuthorizationPolicy))

	// Schema-valid but semantically invalid from the start: targets a Deployment. It is
	// counted and stays absent.
	createAll(t, env, ns, `
apiVersion: policy.linkerd.io/v1alpha1
kind: AuthorizationPolicy
metadata: {name: bogus}
spec:
  targetRef: {group: apps, kind: Deployment, name: web}
  requiredAuthenticationRefs: []`)
	eventually(t, "the invalid policy to be counted", func() bool { return testutil.ToFloat64(invalid) == 2 })
	if ws := src.Warnings(); len(ws) != 1 || !strings.HasPrefix(ws[0], "AuthorizationPolicy "+ns+"/bogus: ") {
		t.Errorf("Warnings() = %q", ws)
	}

	// The informers survive an API server restart (their watches are cut; they relist with
	// back-off, hence the longer deadline).
	env.Restart(t)
	eventually(t, "deleting the policy after the restart", func() bool {
		dctx, dcancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer dcancel()
		return apRes.Delete(dctx, "web-from-gateway", metav1.DeleteOptions{}) == nil
	})
	eventuallyWithin(t, 2*time.Minute, "the deletion to reach the index", func() bool { return len(idsOf()) == 0 })
	res, err := idx.Lookup(web, 8080)
	if err != nil || res.ServerName != "web-http" {
		t.Fatalf("after deleting the policy: %v %v", res.ServerName, err)
	}
}

// invalidUpdateKeepsLastGood updates the AuthorizationPolicy web-from-gateway so that the
// schema accepts it but conversion rejects it (it targets a Deployment): the update is
// counted and warned about, and the last good version stays in effect (the port keeps the
// identities want). Then it restores the policy, allowing api-gateway again.
func invalidUpdateKeepsLastGood(t *testing.T, apRes dynamic.ResourceInterface, src *KubeSource, metrics *Metrics, idsOf func() []string, want []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	invalid := metrics.invalid.WithLabelValues(string(api.KindAuthorizationPolicy))
	before := testutil.ToFloat64(invalid)
	ap, err := apRes.Get(ctx, "web-from-gateway", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	good := ap.DeepCopy()
	_ = unstructured.SetNestedMap(ap.Object, map[string]any{"group": "apps", "kind": "Deployment", "name": "web"}, "spec", "targetRef")
	if _, err := apRes.Update(ctx, ap, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the invalid update to be counted", func() bool { return testutil.ToFloat64(invalid) == before+1 })
	if ws := src.Warnings(); len(ws) != 1 || !strings.HasPrefix(ws[0], "AuthorizationPolicy "+ap.GetNamespace()+"/web-from-gateway: ") {
		t.Errorf("Warnings() = %q", ws)
	}
	tutil.Never(t, time.Second, "the policy to change after an invalid update", func() bool { return !slices.Equal(idsOf(), want) })

	ap, err = apRes.Get(ctx, "web-from-gateway", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	good.SetResourceVersion(ap.GetResourceVersion())
	_ = unstructured.SetNestedSlice(good.Object, []any{map[string]any{"kind": "ServiceAccount", "name": "api-gateway"}}, "spec", "requiredAuthenticationRefs")
	if _, err := apRes.Update(ctx, good, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the warning to clear", func() bool { return len(src.Warnings()) == 0 })
}
