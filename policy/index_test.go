package policy

import (
	"testing"

	"github.com/meridian-mesh/meridian/policy/api"
	"github.com/meridian-mesh/meridian/policy/compute"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap/zaptest"
)

func newTestIndex(t *testing.T) (*Index, *Metrics) {
	cfg := compute.DefaultConfig()
	m := NewMetrics(nil)
	return NewIndex(&cfg, zaptest.NewLogger(t), m), m
}

func woken(w *watcher) bool {
	select {
	case <-w.wake:
		return true
	default:
		return false
	}
}

// TestIndexWakeScope: a change wakes only the streams it may affect.
func TestIndexWakeScope(t *testing.T) {
	idx, _ := newTestIndex(t)
	for _, r := range seedResources(t) {
		idx.Apply(r)
	}
	idx.Apply(manifests(t, "apiVersion: v1\nkind: Pod\nmetadata: {name: web-0, namespace: bank}")[0])
	web, err := idx.watch(compute.Key{Namespace: "shop", Name: "web-0"})
	if err != nil {
		t.Fatal(err)
	}
	gw, _ := idx.watch(compute.Key{Namespace: "shop", Name: "api-gateway-0"})
	bank, _ := idx.watch(compute.Key{Namespace: "bank", Name: "web-0"})
	if _, err := idx.watch(compute.Key{Namespace: "shop", Name: "nope"}); err != ErrPodNotFound {
		t.Fatalf("watch unknown pod: %v", err)
	}
	check := func(what string, want ...*watcher) {
		t.Helper()
		for _, w := range []*watcher{web, gw, bank} {
			got := woken(w)
			exp := false
			for _, x := range want {
				exp = exp || x == w
			}
			if got != exp {
				t.Errorf("%s: watcher of %v woken=%v, want %v", what, w.pod, got, exp)
			}
		}
	}
	check("nothing yet")
	pods := readTestdata(t, "pods.yaml")
	for _, r := range manifests(t, pods) {
		idx.Apply(r) // identical objects: nobody is woken
	}
	check("re-applying identical pods")
	idx.Apply(manifests(t, "apiVersion: v1\nkind: Pod\nmetadata: {name: web-0, namespace: shop, labels: {app: web, v: '2'}}\nspec: {containers: [{name: a, ports: [{name: http, containerPort: 8080}]}]}")[0])
	check("a pod change", web)
	idx.Apply(manifests(t, "apiVersion: policy.linkerd.io/v1beta3\nkind: Server\nmetadata: {name: x, namespace: shop}\nspec: {podSelector: {}, port: 1}")[0])
	check("a Server in shop", web, gw)
	idx.Apply(manifests(t, "apiVersion: policy.linkerd.io/v1alpha1\nkind: NetworkAuthentication\nmetadata: {name: nets, namespace: bank}\nspec: {networks: [{cidr: 10.0.0.0/8}]}")[0])
	check("an authentication", web, gw, bank)
	idx.Delete(api.KindServer, compute.Key{Namespace: "bank", Name: "missing"})
	check("deleting an unknown Server")
	idx.Delete(api.KindPod, compute.Key{Namespace: "bank", Name: "web-0"})
	select {
	case <-bank.gone:
	default:
		t.Error("deleting a pod did not end its watchers")
	}
	idx.unwatch(web)
	idx.unwatch(web) // idempotent
	idx.unwatch(gw)
	idx.unwatch(bank)
}

// TestIndexConflicts: two Servers on one pod port are counted and the older one wins.
func TestIndexConflicts(t *testing.T) {
	idx, m := newTestIndex(t)
	for _, r := range seedResources(t) {
		idx.Apply(r)
	}
	second := manifests(t, `
apiVersion: policy.linkerd.io/v1beta3
kind: Server
metadata: {name: web-8080, namespace: shop, creationTimestamp: "2030-01-01T00:00:00Z"}
spec: {podSelector: {matchLabels: {app: web}}, port: 8080, proxyProtocol: opaque}`)[0]
	idx.Apply(second)
	if got := testutil.ToFloat64(m.conflicts.WithLabelValues("shop")); got != 1 {
		t.Errorf("policy_server_conflicts = %v, want 1", got)
	}
	res, err := idx.Lookup(compute.Key{Namespace: "shop", Name: "web-0"}, 8080)
	if err != nil {
		t.Fatal(err)
	}
	// web-http has no creationTimestamp in the manifest (zero time: oldest).
	if res.ServerName != "web-http" || len(res.Conflicts) != 1 || res.Conflicts[0] != "web-8080" {
		t.Errorf("winner %q, conflicts %v", res.ServerName, res.Conflicts)
	}
	idx.Delete(api.KindServer, second.Key)
	if got := testutil.ToFloat64(m.conflicts.WithLabelValues("shop")); got != 0 {
		t.Errorf("policy_server_conflicts after delete = %v, want 0", got)
	}
}

// TestIndexReset: a reset removes what is no longer present and keeps the rest.
func TestIndexReset(t *testing.T) {
	idx, m := newTestIndex(t)
	rs := seedResources(t)
	idx.Reset(api.Kinds, rs)
	if got := testutil.ToFloat64(m.objects.WithLabelValues("Pod")); got != 2 {
		t.Fatalf("pods = %v", got)
	}
	var withoutPolicy []api.Resource
	for _, r := range rs {
		if r.Kind != api.KindAuthorizationPolicy {
			withoutPolicy = append(withoutPolicy, r)
		}
	}
	idx.Reset(api.Kinds, withoutPolicy)
	res, err := idx.Lookup(compute.Key{Namespace: "shop", Name: "web-0"}, 8080)
	if err != nil {
		t.Fatal(err)
	}
	if res.ServerName != "web-http" || len(res.Server.GetAuthorizations()) != 0 {
		t.Errorf("after reset: %q with %d authorizations", res.ServerName, len(res.Server.GetAuthorizations()))
	}
	idx.Reset(api.Kinds, nil)
	if _, err := idx.Lookup(compute.Key{Namespace: "shop", Name: "web-0"}, 8080); err != ErrPodNotFound {
		t.Errorf("after empty reset: %v", err)
	}
}

func BenchmarkLookup(b *testing.B) {
	cfg := compute.DefaultConfig()
	idx := NewIndex(&cfg, zaptest.NewLogger(b), nil)
	for _, r := range seedResources(b) {
		idx.Apply(r)
	}
	key := compute.Key{Namespace: "shop", Name: "web-0"}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := idx.Lookup(key, 8080); err != nil {
			b.Fatal(err)
		}
	}
}

// Metrics can share a registry with another controller or a component using the same names.
func TestMetricsShareRegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewHistogram(prometheus.HistogramOpts{Name: "pods_informer_lag_seconds", Help: "someone else's"}))
	a, b := NewMetrics(reg), NewMetrics(reg)
	a.sent.Inc()
	if got := testutil.ToFloat64(b.sent); got != 1 {
		t.Errorf("second Metrics does not share the counter: %v", got)
	}
	NewKubeSource(nil, nil, reg, zaptest.NewLogger(t), a) // must not panic on the clash
}
