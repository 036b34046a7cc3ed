package source

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meridian-mesh/meridian/internal/manifest/manifesttest"
	"github.com/meridian-mesh/meridian/internal/testutil"
	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"
)

// leakCheck verifies, after every cleanup registered later has run, that the test left no
// goroutine behind.
func leakCheck(t *testing.T) {
	opt := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, opt) })
}

// dirHarness runs a Dir source on a temporary directory.
type dirHarness struct {
	manifesttest.Follower
	src *Dir
	rec *recorder
}

func startDir(t *testing.T, files map[string]string, cfg func(*DirConfig)) *dirHarness {
	t.Helper()
	h := &dirHarness{rec: newRecorder()}
	h.Follower = manifesttest.Follower{T: t, Dir: t.TempDir(), Events: &h.rec.Events, Scans: func() int64 { return h.src.m.Scans() }}
	for name, content := range files {
		h.Write(name, content)
	}
	c := DefaultDirConfig(h.Dir)
	c.Debounce = 10 * time.Millisecond
	c.Rescan = 50 * time.Millisecond
	if cfg != nil {
		cfg(&c)
	}
	h.src = NewDirWithConfig(c, zaptest.NewLogger(t))
	testutil.Go(t, "Run", func(ctx context.Context) error { return h.src.Run(ctx, h.rec) })
	testutil.Eventually(t, manifesttest.Wait, "first scan", h.src.Synced)
	return h
}

func svcYAML(ns, name, extraLabel string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Service
metadata:
  name: %s
  namespace: %s
  labels: {app: %s%s}
spec:
  ports: [{name: http, port: 80, targetPort: http}]
`, name, ns, name, extraLabel)
}

func podYAML(ns, name, ip string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata: {name: %s, namespace: %s}\nstatus: {podIP: %s}\n", name, ns, ip)
}

func sliceYAML(ns, name, svc string, addrs ...string) string {
	var eps strings.Builder
	for _, a := range addrs {
		fmt.Fprintf(&eps, "- addresses: [%q]\n  conditions: {ready: true}\n", a)
	}
	return fmt.Sprintf(`apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: %s
  namespace: %s
  labels: {kubernetes.io/service-name: %s}
addressType: IPv4
ports: [{name: http, port: 8080}]
endpoints:
%s`, name, ns, svc, eps.String())
}

// TestDirInitialLoad checks what the destination's Dir delivers of a first scan: its kinds,
// in kind order, and nothing of other kinds. Which files are read (extensions, hidden files,
// Lists, JSON, empty files) is internal/manifest's and tested there.
func TestDirInitialLoad(t *testing.T) {
	leakCheck(t)
	h := startDir(t, map[string]string{
		"shop.yaml": svcYAML("shop", "web", "") + "---\n" + sliceYAML("shop", "web-1", "web", "127.0.10.1") +
			"---\n" + podYAML("shop", "web-a", "127.0.10.1"),
		"deployment.yaml":      "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n",
		"sub/namespaces.yaml":  "apiVersion: v1\nkind: Namespace\nmetadata: {name: shop}\n",
		"sub/dir/another.yaml": podYAML("billing", "pay-a", "127.0.20.1"),
	}, nil)

	// The first scan was delivered before Synced turned true, in kind order.
	got := h.rec.Take()
	want := []string{"+Pod billing/pay-a", "+Pod shop/web-a", "+Service shop/web", "+EndpointSlice shop/web-1"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("initial events\n got  %q\n want %q", got, want)
	}
	if errs := h.src.Errors(); len(errs) != 0 {
		t.Fatalf("Errors() = %v, want none", errs)
	}
	h.Expect() // rescans deliver nothing
}

func TestDirFollowsChanges(t *testing.T) {
	leakCheck(t)
	twoServices := svcYAML("shop", "web", "") + "---\n" + svcYAML("shop", "cart", "") + "---\n" +
		sliceYAML("shop", "web-1", "web", "127.0.10.1", "127.0.10.2")
	h := startDir(t, map[string]string{
		"shop.yaml":  twoServices,
		"other.yaml": podYAML("shop", "web-a", "127.0.10.1"),
	}, nil)
	h.Expect("+Service shop/web", "+Service shop/cart", "+EndpointSlice shop/web-1", "+Pod shop/web-a")

	steps := []struct {
		name    string
		change  func()
		want    []string
		errs    []string // substrings of Errors(), in order
		lastSvc string   // label "tier" expected on Service shop/web, when set
	}{
		{
			name:   "edit one object: only it is updated",
			change: func() { h.Write("shop.yaml", strings.Replace(twoServices, "{app: web}", "{app: web, tier: front}", 1)) },
			want:   []string{"+Service shop/web"},
		},
		{
			name: "edit an endpoint address",
			change: func() {
				h.Write("shop.yaml", strings.Replace(strings.Replace(twoServices, "{app: web}", "{app: web, tier: front}", 1), "127.0.10.2", "127.0.10.3", 1))
			},
			want: []string{"+EndpointSlice shop/web-1"},
		},
		{
			name: "remove an object from a file: it is deleted",
			change: func() {
				h.Write("shop.yaml", strings.Replace(svcYAML("shop", "web", ""), "{app: web}", "{app: web, tier: front}", 1)+"---\n"+
					sliceYAML("shop", "web-1", "web", "127.0.10.1", "127.0.10.3"))
			},
			want: []string{"-Service shop/cart"},
		},
		{
			name: "break the file: nothing changes, the error has file and line",
			change: func() {
				h.Write("shop.yaml", svcYAML("shop", "web", "")+"---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: [oops\n")
			},
			want: nil,
			errs: []string{"shop.yaml:13: yaml: did not find expected ',' or ']'"},
		},
		{
			name: "invalid object: nothing changes, the error names the field",
			change: func() {
				h.Write("shop.yaml", svcYAML("shop", "web", "")+"---\n"+sliceYAML("shop", "web-1", "web", "127.0.10.999"))
			},
			want: nil,
			errs: []string{`shop.yaml:19: kind EndpointSlice shop/web-1: endpoints[0].addresses[0]: "127.0.10.999" is not an IP address`},
		},
		{
			name: "fix the file: the difference from the last good version is delivered",
			change: func() {
				h.Write("shop.yaml", svcYAML("shop", "web", "")+"---\n"+sliceYAML("shop", "web-1", "web", "127.0.10.1", "127.0.10.3"))
			},
			want: []string{"+Service shop/web"}, // the label tier: front is gone; the slice is as before
		},
		{
			name: "a new file",
			change: func() {
				h.Write("new/more.yaml", svcYAML("legacy", "inventory", "")+"---\n"+podYAML("legacy", "inv-a", "127.0.30.1"))
			},
			want: []string{"+Service legacy/inventory", "+Pod legacy/inv-a"},
		},
		{
			name:   "delete a file: its objects are deleted",
			change: func() { h.Remove("shop.yaml") },
			want:   []string{"-Service shop/web", "-EndpointSlice shop/web-1"},
		},
		{
			name:   "delete a directory",
			change: func() { _ = os.RemoveAll(filepath.Join(h.Dir, "new")) },
			want:   []string{"-Service legacy/inventory", "-Pod legacy/inv-a"},
		},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			h.T = t
			s.change()
			if s.want == nil {
				// Wait until the error shows, then make sure nothing was delivered.
				testutil.Eventually(t, 5*time.Second, "the error to be reported", func() bool { return len(h.src.Errors()) > 0 })
			}
			h.Expect(s.want...)
			var errs []string
			for _, e := range h.src.Errors() {
				errs = append(errs, e.Error())
			}
			if len(errs) != len(s.errs) {
				t.Fatalf("Errors() = %q, want %q", errs, s.errs)
			}
			for i := range errs {
				if !strings.HasPrefix(errs[i], filepath.Join(h.Dir, "")+"/") || !strings.HasSuffix(errs[i], s.errs[i]) {
					t.Errorf("error %q, want %s/%s", errs[i], h.Dir, s.errs[i])
				}
			}
		})
	}
	if h.rec.get("Pod shop/web-a") == nil {
		t.Errorf("the untouched file's pod was lost")
	}
}

// TestDirMalformedKeepsPrevious checks that a broken file keeps the objects of its last
// good version, with their content, across many rescans.
func TestDirMalformedKeepsPrevious(t *testing.T) {
	h := startDir(t, map[string]string{"a.yaml": svcYAML("shop", "web", ", tier: front")}, nil)
	h.Expect("+Service shop/web")
	h.Write("a.yaml", "apiVersion: v1\nkind: Service\nmetadata: {namespace: shop}\n")
	testutil.Eventually(t, 5*time.Second, "the error", func() bool { return len(h.src.Errors()) == 1 })
	h.Expect()
	if got := h.src.Errors()[0].Error(); !strings.HasSuffix(got, "a.yaml:3: kind Service: metadata.name: is empty") {
		t.Errorf("error = %q", got)
	}
	if svc := h.rec.get("Service shop/web"); svc == nil || svc.GetLabels()["tier"] != "front" {
		t.Errorf("previous version not kept: %v", svc)
	}
}

func TestDirPodAndReplay(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := NewDir(t.TempDir(), nil).Replay(ctx); err == nil {
		t.Errorf("Replay before Run succeeded")
	}
	h := startDir(t, map[string]string{
		"a.yaml": svcYAML("shop", "web", "") + "---\n" + sliceYAML("shop", "web-1", "web", "127.0.10.1") + "---\n" + podYAML("shop", "a", "127.0.10.1"),
		"b.yaml": podYAML("shop", "b", "127.0.10.2"),
	}, nil)
	h.Expect("+Service shop/web", "+EndpointSlice shop/web-1", "+Pod shop/a", "+Pod shop/b")
	if p := h.src.Pod("shop", "a"); p == nil || len(p.IPs()) != 1 || p.IPs()[0].String() != "127.0.10.1" {
		t.Errorf("Pod(shop, a) = %v", p)
	}
	if p := h.src.Pod("shop", "web"); p != nil {
		t.Errorf("Pod(shop, web) = %v, want nil (web is a Service)", p)
	}
	if err := h.src.Replay(ctx); err != nil {
		t.Fatal(err)
	}
	got := h.rec.Take()
	want := []string{"+Pod shop/a", "+Pod shop/b", "+Service shop/web", "+EndpointSlice shop/web-1"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("Replay delivered %q, want %q", got, want)
	}
	h.Remove("b.yaml")
	h.Expect("-Pod shop/b")
	if p := h.src.Pod("shop", "b"); p != nil {
		t.Errorf("deleted pod still returned: %v", p)
	}
	if err := h.src.Replay(ctx); err != nil {
		t.Fatal(err)
	}
	if got := h.rec.Take(); len(got) != 3 || strings.Contains(strings.Join(got, ","), "shop/b") {
		t.Errorf("Replay after a delete delivered %q", got)
	}
}

func TestDirErrors(t *testing.T) {
	src := NewDir(filepath.Join(t.TempDir(), "missing"), zaptest.NewLogger(t))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := src.Run(ctx, newRecorder()); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("Run on a missing directory = %v, want an error naming it", err)
	}
	if src.Synced() {
		t.Errorf("Synced after a failed start")
	}
	file := filepath.Join(t.TempDir(), "f.yaml")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := NewDir(file, nil).Run(ctx, newRecorder()); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("Run on a file = %v, want 'not a directory'", err)
	}
}

func BenchmarkDecodeExamples(b *testing.B) {
	data, err := os.ReadFile(filepath.Join("..", "..", "deploy", "examples", "shop.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for i := 0; i < b.N; i++ {
		if got := dirDecoder.Decode("shop.yaml", data); len(got.Errors) > 0 {
			b.Fatal(got.Errors)
		}
	}
}

// TestDirReplacedDirectory checks that a directory replaced as `rm -rf d && cp -r src d`
// does, and one moved away and back, is followed within the rescan period, and that what it
// held is kept while it is away.
func TestDirReplacedDirectory(t *testing.T) {
	leakCheck(t)
	h := startDir(t, map[string]string{
		"shop.yaml": svcYAML("shop", "web", "") + "---\n" + sliceYAML("shop", "web-1", "web", "127.0.10.1"),
		"pods.yaml": podYAML("shop", "web-a", "127.0.10.1"),
	}, nil)
	h.Expect("+Service shop/web", "+EndpointSlice shop/web-1", "+Pod shop/web-a")

	src := t.TempDir()
	files := map[string]string{
		"shop.yaml":     svcYAML("shop", "web", "") + "---\n" + sliceYAML("shop", "web-1", "web", "127.0.10.1", "127.0.10.2"),
		"sub/cart.yaml": svcYAML("shop", "cart", ""),
	}
	for name, content := range files {
		p := filepath.Join(src, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.RemoveAll(h.Dir); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(h.Dir, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	h.Expect("+EndpointSlice shop/web-1", "+Service shop/cart", "-Pod shop/web-a")
	h.Write("sub/cart.yaml", svcYAML("shop", "cart", ", tier: back"))
	h.Expect("+Service shop/cart")

	// Moved away: nothing is deleted, the problem is reported; moved back: followed again.
	away := h.Dir + "-away"
	if err := os.Rename(h.Dir, away); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(away) })
	testutil.Eventually(t, 5*time.Second, "the missing directory to be reported", func() bool { return len(h.src.Errors()) == 1 })
	h.Expect()
	if ws := h.src.Warnings(); len(ws) != 1 || !strings.Contains(ws[0], "cannot read the directory; keeping what was loaded from it") {
		t.Errorf("Warnings() = %q", ws)
	}
	if err := os.WriteFile(filepath.Join(away, "pods.yaml"), []byte(podYAML("shop", "web-b", "127.0.10.2")), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(away, h.Dir); err != nil {
		t.Fatal(err)
	}
	h.Expect("+Pod shop/web-b")
	if errs := h.src.Errors(); len(errs) != 0 {
		t.Errorf("Errors() = %v after the directory came back", errs)
	}
	if p := h.src.Pod("shop", "web-b"); p == nil || len(p.IPs()) != 1 || p.IPs()[0].String() != "127.0.10.2" {
		t.Errorf("Pod(shop, web-b) = %v", p)
	}
}
