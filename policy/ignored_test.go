package policy

import (
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap/zaptest"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/meridian-mesh/meridian/internal/manifest/manifesttest"
	"github.com/meridian-mesh/meridian/policy/api"
	"github.com/meridian-mesh/meridian/policy/compute"
)

// ignoredServer is a Server on web-0:8080 with the given accessPolicy.
func ignoredServer(accessPolicy string) string {
	return `apiVersion: policy.linkerd.io/v1beta3
kind: Server
metadata: {name: web-http, namespace: shop}
spec:
  podSelector: {matchLabels: {app: web}}
  port: 8080
  accessPolicy: ` + accessPolicy + "\n"
}

// servedBy returns the Server that serves web-0:8080 and its number of authorizations.
func servedBy(t *testing.T, idx *Index) (string, int) {
	t.Helper()
	res, err := idx.Lookup(compute.Key{Namespace: "shop", Name: "web-0"}, 8080)
	if err != nil {
		t.Fatal(err)
	}
	return res.ServerName, len(res.Server.GetAuthorizations())
}

// TestDirUnknownAccessPolicyDenies: a Server whose accessPolicy is none of Linkerd's (which
// the API server refuses with our CRDs, but not with Linkerd's, and which no API server checks
// in a directory) applies with no default authorization, as Linkerd's policy controller
// indexes it, and the ignored value is reported at its line. It used to be refused, so a
// Server that had never been good left its port on the cluster default, all-unauthenticated;
// an edit to a bad value now narrows the port to deny rather than keeping the wider policy.
func TestDirUnknownAccessPolicyDenies(t *testing.T) {
	idx, src, dir := dirIndex(t, map[string]string{"pods.yaml": webPod, "server.yaml": ignoredServer("allow")})
	if name, n := servedBy(t, idx); name != "web-http" || n != 0 {
		t.Fatalf("port 8080 served by %q with %d authorizations, want web-http with none", name, n)
	}
	want := filepath.Join(dir, "server.yaml") + `:7: kind Server shop/web-http: spec.accessPolicy: invalid default inbound policy "allow": want one of`
	if w := src.Warnings(); len(w) != 1 || !strings.HasPrefix(w[0], want) {
		t.Fatalf("Warnings() = %q, want one starting %q", w, want)
	}

	manifesttest.WriteAtomic(t, filepath.Join(dir, "server.yaml"), ignoredServer("all-unauthenticated"))
	eventually(t, "the Server's default authorizations", func() bool { _, n := servedBy(t, idx); return n > 0 })
	eventually(t, "the warning cleared", func() bool { return len(src.Warnings()) == 0 })
	manifesttest.WriteAtomic(t, filepath.Join(dir, "server.yaml"), ignoredServer("all-unauthenticatd"))
	eventually(t, "the edit applied as deny", func() bool { name, n := servedBy(t, idx); return name == "web-http" && n == 0 })
	if w := src.Warnings(); len(w) != 1 || !strings.Contains(w[0], `spec.accessPolicy: invalid default inbound policy "all-unauthenticatd"`) {
		t.Fatalf("Warnings() = %q, want the misspelt accessPolicy", w)
	}
}

// TestKubeUnknownAccessPolicyDenies gives the Kubernetes source's informer callbacks a Server
// whose accessPolicy is none of Linkerd's (as an API server with Linkerd's CRDs, which put
// no enum on it, would send): it applies with no default authorization and is listed by
// Warnings until a good version replaces it.
func TestKubeUnknownAccessPolicyDenies(t *testing.T) {
	log := zaptest.NewLogger(t)
	cfg := compute.DefaultConfig()
	idx := NewIndex(&cfg, log, nil)
	for _, r := range manifests(t, webPod) {
		idx.Apply(r)
	}
	k := NewKubeSource(nil, nil, nil, log, nil)
	h := k.handler(api.KindServer, idx)
	server := func(accessPolicy, version string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(ignoredServer(accessPolicy)), &u.Object); err != nil {
			t.Fatal(err)
		}
		u.SetResourceVersion(version)
		return u
	}
	bad := server("allow", "1")
	h.OnAdd(bad, false)
	if name, n := servedBy(t, idx); name != "web-http" || n != 0 {
		t.Fatalf("port 8080 served by %q with %d authorizations, want web-http with none", name, n)
	}
	if w := k.Warnings(); len(w) != 1 || !strings.HasPrefix(w[0], `Server shop/web-http: spec.accessPolicy: invalid default inbound policy "allow": want one of`) {
		t.Fatalf("Warnings() = %q, want the accessPolicy", w)
	}
	h.OnUpdate(bad, server("all-unauthenticated", "2"))
	if _, n := servedBy(t, idx); n == 0 || len(k.Warnings()) != 0 {
		t.Fatalf("after the fix: %d authorizations, warnings %q; want the default's and none", n, k.Warnings())
	}
	// A warned Server that is deleted leaves no warning behind.
	bad = server("allow", "3")
	h.OnUpdate(server("all-unauthenticated", "2"), bad)
	if len(k.Warnings()) != 1 {
		t.Fatalf("Warnings() = %q, want the accessPolicy again", k.Warnings())
	}
	h.OnDelete(bad)
	if w := k.Warnings(); len(w) != 0 {
		t.Fatalf("Warnings() after the delete = %q, want none", w)
	}
}
