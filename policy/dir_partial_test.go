package policy

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/meridian-mesh/meridian/internal/manifest"
	"github.com/meridian-mesh/meridian/policy/compute"
)

// webPod is shop/web-0, labelled app=web, with the container port http 8080.
const webPod = `apiVersion: v1
kind: Pod
metadata: {name: web-0, namespace: shop, labels: {app: web}}
spec:
  containers:
  - name: app
    ports: [{name: http, containerPort: 8080}]
`

// TestDirServerBesideBrokenObject: a deny Server in a new file beside an invalid
// AuthorizationPolicy (a kind misspelt) applies, and the policy's error is reported. The
// whole file used to be withheld, so the pod's port was served the cluster default,
// all-unauthenticated.
func TestDirServerBesideBrokenObject(t *testing.T) {
	const server = `apiVersion: policy.linkerd.io/v1beta3
kind: Server
metadata: {name: web-http, namespace: shop}
spec: {podSelector: {matchLabels: {app: web}}, port: 8080, accessPolicy: deny}
`
	const badPolicy = `apiVersion: policy.linkerd.io/v1alpha1
kind: AuthorizationPolicy
metadata: {name: from-gw, namespace: shop}
spec:
  targetRef: {group: policy.linkerd.io, kind: Server, name: web-http}
  requiredAuthenticationRefs: [{kind: ServiceAcount, name: gw}]
`
	idx, src, _ := dirIndex(t, map[string]string{"pods.yaml": webPod, "policy.yaml": server + "---\n" + badPolicy})
	res, err := idx.Lookup(compute.Key{Namespace: "shop", Name: "web-0"}, 8080)
	if err != nil {
		t.Fatal(err)
	}
	if res.ServerName != "web-http" || len(res.Server.GetAuthorizations()) != 0 {
		t.Fatalf("port 8080 served by %q (%v) with %d authorizations, want the deny Server web-http",
			res.ServerName, res.Server.GetLabels(), len(res.Server.GetAuthorizations()))
	}
	if len(src.Warnings()) == 0 {
		t.Fatal("the invalid AuthorizationPolicy is not reported")
	}
}

// dirIndex writes files into a new directory and runs a DirSource on it into a new Index
// until the test ends; it returns once the directory has been read.
func dirIndex(t *testing.T, files map[string]string) (*Index, *DirSource, string) {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	log := zaptest.NewLogger(t)
	cfg := compute.DefaultConfig()
	idx := NewIndex(&cfg, log, nil)
	mcfg := manifest.DefaultConfig(dir)
	mcfg.Debounce, mcfg.Rescan = 10*time.Millisecond, 100*time.Millisecond
	src := NewDirSource(mcfg, nil, log, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = src.Run(ctx, idx) }()
	t.Cleanup(func() { cancel(); <-done })
	eventually(t, "the directory read", src.Synced)
	return idx, src, dir
}
