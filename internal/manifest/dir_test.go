package manifest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meridian-mesh/meridian/internal/manifest/manifesttest"
	"github.com/meridian-mesh/meridian/internal/testutil"
	"github.com/prometheus/client_golang/prometheus"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// wait bounds every wait in these tests.
const wait = 10 * time.Second

// recorder records deliveries; it never blocks.
type recorder struct {
	manifesttest.Events
	mu      sync.Mutex
	all     map[Key]Object
	initial int
}

func (r *recorder) deliver(u Update) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if u.Initial {
		r.initial++
	}
	for _, o := range u.Upserts {
		r.Add("+" + o.Key.String())
	}
	for _, o := range u.Deletes {
		r.Add("-" + o.Key.String())
	}
	r.all = u.All
}

func (r *recorder) initials() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.initial
}

// label returns the label "from" of a Thing or Widget as last delivered, "" when absent.
func (r *recorder) label(kind, ns, name string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	o, ok := r.all[Key{Kind: kind, Namespace: ns, Name: name}]
	if !ok {
		return ""
	}
	return o.Value.(*thing).Metadata.Labels["from"]
}

// harness runs a Dir on a temporary directory.
type harness struct {
	manifesttest.Follower
	d    *Dir
	rec  *recorder
	reg  *prometheus.Registry
	logs *observer.ObservedLogs
}

func startDir(t *testing.T, files map[string]string, cfg func(*Config)) *harness {
	t.Helper()
	h := newHarness(t, t.TempDir(), files, cfg)
	h.run()
	return h
}

func newHarness(t *testing.T, dir string, files map[string]string, cfg func(*Config)) *harness {
	t.Helper()
	core, logs := observer.New(zapcore.DebugLevel)
	h := &harness{rec: &recorder{}, reg: prometheus.NewRegistry(), logs: logs}
	h.Follower = manifesttest.Follower{T: t, Dir: dir, Events: &h.rec.Events, Scans: func() int64 { return h.d.Scans() }}
	for name, content := range files {
		h.Write(name, content)
	}
	c := DefaultConfig(dir)
	c.Debounce = 10 * time.Millisecond
	c.Rescan = 50 * time.Millisecond
	c.Order = []string{"Widget", "Thing"}
	if cfg != nil {
		cfg(&c)
	}
	h.d = NewDir(c, testDecoder(), h.reg, zap.New(core))
	return h
}

func (h *harness) run() {
	h.T.Helper()
	testutil.Go(h.T, "Run", func(ctx context.Context) error { return h.d.Run(ctx, h.rec.deliver) })
	testutil.Eventually(h.T, wait, "the first scan", h.d.Synced)
}

// errorsAre checks the current problems: one per suffix, in order, each under the directory.
func (h *harness) errorsAre(suffixes ...string) {
	h.T.Helper()
	errs := errStrings(h.d.Errors())
	ok := len(errs) == len(suffixes)
	for i := 0; ok && i < len(errs); i++ {
		ok = strings.HasPrefix(errs[i], h.Dir+string(filepath.Separator)) && strings.HasSuffix(errs[i], suffixes[i])
	}
	if !ok {
		h.T.Fatalf("Errors() = %q, want %d under %s ending in %q", errs, len(suffixes), h.Dir, suffixes)
	}
	if w := h.d.Warnings(); strings.Join(w, "\n") != strings.Join(errs, "\n") {
		h.T.Fatalf("Warnings() = %q, want the errors %q", w, errs)
	}
}

// waitErrors waits until the number of current problems is n.
func (h *harness) waitErrors(n int) {
	h.T.Helper()
	testutil.Eventually(h.T, wait, fmt.Sprintf("%d errors", n), func() bool { return len(h.d.Errors()) == n })
}

// gauge returns manifest_errors of a file of the directory, -1 when it has no series.
func (h *harness) gauge(name string) float64 {
	h.T.Helper()
	mfs, err := h.reg.Gather()
	if err != nil {
		h.T.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "manifest_errors" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if m.GetLabel()[0].GetValue() == filepath.Join(h.Dir, name) {
				return m.GetGauge().GetValue()
			}
		}
	}
	return -1
}

// logCount counts log entries at level whose "error" field ends in suffix.
func (h *harness) logCount(level zapcore.Level, suffix string) int {
	n := 0
	for _, e := range h.logs.FilterLevelExact(level).All() {
		if s, ok := e.ContextMap()["error"].(string); ok && strings.HasSuffix(s, suffix) {
			n++
		}
	}
	return n
}

func TestDirInitialLoad(t *testing.T) {
	h := newHarness(t, t.TempDir(), map[string]string{
		"shop.yaml":            thingYAML("shop", "a", "") + "---\n" + strings.Replace(widgetB, "{size: 3}", "{size: 4}", 1),
		"sub/dir/more.yml":     "apiVersion: v1\nkind: List\nitems:\n" + manifesttest.IndentItem(thingYAML("billing", "pay", "")),
		"json/legacy.json":     `{"apiVersion":"v1","kind":"Thing","metadata":{"name":"old","namespace":"legacy"}}`,
		"notes.txt":            thingYAML("x", "ignored-txt", ""),
		".hidden/secret.yaml":  thingYAML("x", "ignored-hidden", ""),
		".editor-backup.yaml":  thingYAML("x", "ignored-dotfile", ""),
		"deployment.yaml":      "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n",
		"sub/dir/.keep":        "",
		"empty.yaml":           "",
		"comments-only.YAML":   "# nothing\n",
		"sub/dir/another.yaml": "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w, namespace: billing}\n",
	}, nil)
	if err := h.d.Ready(); err == nil {
		t.Errorf("Ready before Run = nil")
	}
	h.run()
	if err := h.d.Ready(); err != nil {
		t.Errorf("Ready after the first scan: %v", err)
	}
	// The first scan was delivered before Synced turned true, in kind order.
	got := h.rec.Take()
	want := []string{"+Widget billing/w", "+Widget shop/b", "+Thing billing/pay", "+Thing legacy/old", "+Thing shop/a"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("initial events\n got  %q\n want %q", got, want)
	}
	h.errorsAre()
	if h.d.Warnings() != nil {
		t.Errorf("Warnings() = %q, want nil", h.d.Warnings())
	}
	h.Expect() // rescans deliver nothing
	if n := h.rec.initials(); n != 1 {
		t.Errorf("%d initial deliveries", n)
	}

	// Deletes come in the reverse kind order.
	h.Remove("shop.yaml")
	var got2 []string
	testutil.Eventually(t, wait, "the deletes", func() bool { got2 = append(got2, h.rec.Take()...); return len(got2) >= 2 })
	if strings.Join(got2, ",") != "-Thing shop/a,-Widget shop/b" {
		t.Errorf("deletes = %q", got2)
	}
}

func TestDirEmptyInitialDelivery(t *testing.T) {
	h := startDir(t, nil, nil)
	h.Expect()
	h.rec.mu.Lock()
	defer h.rec.mu.Unlock()
	if h.rec.initial != 1 || h.rec.all == nil || len(h.rec.all) != 0 {
		t.Fatalf("initial deliveries %d, state %v", h.rec.initial, h.rec.all)
	}
}

// TestDirKeepsLastGood checks that a file with a typo, or with an invalid object, keeps
// every object of its last good version, with its content, across rescans; that the
// problem is reported (Errors, Warnings, the gauge, one warn log) and cleared when fixed.
func TestDirKeepsLastGood(t *testing.T) {
	good := thingYAML("shop", "a", "v1") + "---\n" + thingYAML("shop", "b", "v1")
	h := startDir(t, map[string]string{"a.yaml": good, "other.yaml": thingYAML("shop", "c", "v1")}, nil)
	h.Expect("+Thing shop/a", "+Thing shop/b", "+Thing shop/c")
	if h.gauge("a.yaml") != -1 {
		t.Errorf("manifest_errors has a series for a clean file")
	}

	for _, tc := range []struct {
		name, content, err string
	}{
		{"a YAML typo", strings.Replace(good, "  namespace: shop\n", "  namespace: [shop\n", 1), "a.yaml:5: yaml: did not find expected ',' or ']'"},
		{"an invalid field", strings.Replace(good, "name: b", "name: B", 1), `a.yaml:12: kind Thing shop/B: metadata.name: "B" is invalid: must be lower case`},
		{"a file cut short", good[:strings.Index(good, `"v1"`)], "a.yaml:6: yaml: did not find expected node content"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h.T = t
			h.Write("a.yaml", tc.content)
			h.waitErrors(1)
			h.Expect()
			h.errorsAre(tc.err)
			if got := h.gauge("a.yaml"); got != 1 {
				t.Errorf("manifest_errors{a.yaml} = %v, want 1", got)
			}
			if h.rec.label("Thing", "shop", "a") != "v1" || h.rec.label("Thing", "shop", "b") != "v1" {
				t.Errorf("the last good objects were not kept")
			}
			h.Settle(5)
			if n := h.logCount(zapcore.WarnLevel, tc.err); n != 1 {
				t.Errorf("the error was logged at warn %d times over several rescans, want once", n)
			}

			// Fixed (with a change): the difference from the last good version is delivered.
			h.Write("a.yaml", strings.ReplaceAll(good, `"v1"`, `"v2"`))
			h.Expect("+Thing shop/a", "+Thing shop/b")
			h.errorsAre()
			if h.gauge("a.yaml") != -1 {
				t.Errorf("manifest_errors{a.yaml} still has a series after the fix")
			}
			if n := h.logCount(zapcore.InfoLevel, tc.err); n != 1 {
				t.Errorf("the error's clearing was logged %d times, want once", n)
			}
			h.Write("a.yaml", good)
			h.Expect("+Thing shop/a", "+Thing shop/b")
		})
	}
	if h.rec.label("Thing", "shop", "c") != "v1" {
		t.Errorf("the untouched file's object was lost")
	}
}

// TestDirMalformedAtStart checks that a file broken from the start is reported and the
// others load.
func TestDirMalformedAtStart(t *testing.T) {
	h := startDir(t, map[string]string{
		"bad.yaml":  "apiVersion: v1\nkind: Thing\nmetadata: {name: x}\nspec: {ports: [{port: 0}]}\n",
		"good.yaml": thingYAML("shop", "ok", ""),
	}, nil)
	h.Expect("+Thing shop/ok")
	h.errorsAre(`bad.yaml:4: kind Thing default/x: spec.ports[0].port: "0" is invalid: must be 1-65535`)
}

// TestDirFileNeverGoodDeliversWhatDecoded: a file that has had no version without errors
// delivers the objects that decoded (the first of one defined twice), with its errors
// reported; once it has had a good version, a broken edit keeps that version whole. It used
// to deliver nothing, so a valid policy Server beside a broken object left its pods on the
// default policy.
func TestDirFileNeverGoodDeliversWhatDecoded(t *testing.T) {
	bad := "apiVersion: v1\nkind: Thing\nmetadata: {name: x, namespace: shop}\nspec: {ports: [{port: 0}]}\n"
	h := startDir(t, map[string]string{
		"mixed.yaml": thingYAML("shop", "ok", "v1") + "---\n" + bad + "---\n" + thingYAML("shop", "ok", "twice"),
	}, nil)
	h.Expect("+Thing shop/ok")
	if got := h.rec.label("Thing", "shop", "ok"); got != "v1" {
		t.Errorf("delivered shop/ok labelled %q, want the first definition's v1", got)
	}
	h.errorsAre(`mixed.yaml:12: kind Thing shop/x: spec.ports[0].port: "0" is invalid: must be 1-65535`)
	// Still never good: an edit delivers what now decodes.
	h.Write("mixed.yaml", thingYAML("shop", "ok", "v2")+"---\n"+bad)
	h.Expect("+Thing shop/ok")
	// Good once, then broken: that version is kept whole.
	h.Write("mixed.yaml", thingYAML("shop", "ok", "v3")+"---\n"+thingYAML("shop", "more", "v3"))
	h.Expect("+Thing shop/ok", "+Thing shop/more")
	h.errorsAre()
	h.Write("mixed.yaml", thingYAML("shop", "ok", "v4")+"---\n"+bad)
	h.waitErrors(1)
	h.Expect()
	if h.rec.label("Thing", "shop", "ok") != "v3" || h.rec.label("Thing", "shop", "more") != "v3" {
		t.Errorf("the good version was not kept whole")
	}
}

// TestDirWarnings: an object with an ignored value is delivered, and the warning is reported
// as problems are (Errors, the gauge, warn once); the file stays good, so a broken edit keeps
// that version and its warning, and a fix clears both.
func TestDirWarnings(t *testing.T) {
	warned := strings.Replace(thingYAML("shop", "a", "v1"), "size: 1", "size: -1", 1)
	h := startDir(t, map[string]string{"a.yaml": warned}, nil)
	h.Expect("+Thing shop/a")
	const warning = "a.yaml:7: kind Thing shop/a: spec.size: -1 is below 0; ignored"
	h.errorsAre(warning)
	if got := h.gauge("a.yaml"); got != 1 {
		t.Errorf("manifest_errors{a.yaml} = %v, want 1", got)
	}
	h.Settle(3)
	if n := h.logs.FilterMessage("manifest value ignored; the object is served without it").Len(); n != 1 || h.logCount(zapcore.WarnLevel, warning) != 1 {
		t.Errorf("the warning was logged %d times (%d at warn with it), want once", n, h.logCount(zapcore.WarnLevel, warning))
	}
	h.Write("a.yaml", strings.Replace(warned, "name: a", "name: A", 1))
	h.waitErrors(2)
	h.Expect()
	h.errorsAre(`a.yaml:4: kind Thing shop/A: metadata.name: "A" is invalid: must be lower case`, warning)
	h.Write("a.yaml", thingYAML("shop", "a", "v2"))
	h.Expect("+Thing shop/a")
	h.errorsAre()
}

func TestDirDuplicateAcrossFiles(t *testing.T) {
	h := startDir(t, map[string]string{
		"a.yaml":     thingYAML("shop", "web", "a"),
		"sub/b.yaml": "# b\n" + thingYAML("shop", "web", "b"),
	}, nil)
	h.Expect("+Thing shop/web")
	if got := h.rec.label("Thing", "shop", "web"); got != "a" {
		t.Errorf("the first file in path order should win, got %q", got)
	}
	h.errorsAre("sub/b.yaml:2: Thing shop/web is already defined in " + filepath.Join(h.Dir, "a.yaml") + ":1; this definition is ignored")
	if h.gauge("sub/b.yaml") != 1 {
		t.Errorf("the duplicate is not in manifest_errors")
	}
	h.Remove("a.yaml")
	h.Expect("+Thing shop/web")
	if got := h.rec.label("Thing", "shop", "web"); got != "b" {
		t.Errorf("after a.yaml is gone b.yaml's definition should be delivered, got %q", got)
	}
	h.errorsAre()
}

// TestDirNotifications checks that changes arrive through file notifications alone.
func TestDirNotifications(t *testing.T) {
	h := startDir(t, map[string]string{"a.yaml": thingYAML("shop", "a", "1")}, func(c *Config) { c.Rescan = 0 })
	if got := h.rec.Take(); len(got) != 1 {
		t.Fatalf("initial events %q", got)
	}
	has := func(name, label string) func() bool {
		return func() bool { return h.rec.label("Thing", "shop", name) == label }
	}
	h.Write("sub/b.yaml", thingYAML("shop", "b", "1"))
	testutil.Eventually(t, wait, "the new object", has("b", "1"))
	h.Write("sub/b.yaml", thingYAML("shop", "b", "2"))
	testutil.Eventually(t, wait, "the changed object", has("b", "2"))
	h.Remove("a.yaml")
	testutil.Eventually(t, wait, "the deleted object", has("a", ""))

	// A directory removed and created again is watched again.
	if err := os.RemoveAll(filepath.Join(h.Dir, "sub")); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, wait, "the object of the removed directory to go", has("b", ""))
	h.Write("sub/c.yaml", thingYAML("shop", "c", "1"))
	testutil.Eventually(t, wait, "the object in the new directory", has("c", "1"))
	h.Write("sub/c.yaml", thingYAML("shop", "c", "2"))
	testutil.Eventually(t, wait, "the change in the new directory", has("c", "2"))
}

func TestDirFileTooLarge(t *testing.T) {
	small := thingYAML("shop", "a", "small")
	h := startDir(t, map[string]string{
		"big.yaml":   small + "# " + strings.Repeat("x", 200) + "\n",
		"grows.yaml": thingYAML("shop", "g", "small"),
	}, func(c *Config) { c.MaxFileSize = 150 })
	h.Expect("+Thing shop/g")
	h.errorsAre("big.yaml: file is larger than the 150 bytes allowed (150 B, the size cap); it is not read, and what it held before is kept")

	// A file that grows over the cap keeps what it held.
	h.Write("grows.yaml", thingYAML("shop", "g", "large")+"# "+strings.Repeat("x", 200)+"\n")
	h.waitErrors(2)
	h.Expect()
	if h.rec.label("Thing", "shop", "g") != "small" {
		t.Errorf("the grown file's objects were not kept")
	}
	if got := NewDir(Config{Path: h.Dir}, testDecoder(), nil, nil).cfg.MaxFileSize; got != DefaultMaxFileSize {
		t.Errorf("default cap %d", got)
	}
	if got := sizeString(DefaultMaxFileSize); got != "16 MiB" {
		t.Errorf("the default cap prints as %q", got)
	}
}

func TestDirSymlinks(t *testing.T) {
	outside := t.TempDir()
	manifesttest.WriteAtomic(t, filepath.Join(outside, "target.yaml"), thingYAML("shop", "linked", "1"))
	manifesttest.WriteAtomic(t, filepath.Join(outside, "sub", "x.yaml"), thingYAML("shop", "in-linked-dir", "1"))
	h := newHarness(t, t.TempDir(), map[string]string{"kept.yaml": thingYAML("shop", "kept", "1")}, nil)
	link := func(target, name string) {
		t.Helper()
		if err := os.Symlink(target, filepath.Join(h.Dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	link(filepath.Join(outside, "target.yaml"), "link.yaml") // followed
	link(filepath.Join(outside, "missing.yaml"), "broken.yaml")
	link("loop-b.yaml", "loop-a.yaml")
	link("loop-a.yaml", "loop-b.yaml")
	link(filepath.Join(outside, "sub"), "linked-dir")
	link(filepath.Join(outside, "gone"), "broken-dir")
	h.run()
	h.Expect("+Thing shop/linked", "+Thing shop/kept")
	h.errorsAre(
		`broken-dir: broken symbolic link: its target "`+filepath.Join(outside, "gone")+`" cannot be reached: no such file or directory`,
		`broken.yaml: broken symbolic link: its target "`+filepath.Join(outside, "missing.yaml")+`" does not exist; what the file held before is kept`,
		"linked-dir: symbolic link to a directory, which is not followed; link the files instead",
		"loop-a.yaml: symbolic link loop (too many levels of symbolic links); what the file held before is kept",
		"loop-b.yaml: symbolic link loop (too many levels of symbolic links); what the file held before is kept",
	)

	// A file replaced by a broken link (a ConfigMap mount caught mid-swap) keeps its objects.
	h.Remove("kept.yaml")
	link(filepath.Join(outside, "not-yet.yaml"), "kept.yaml")
	h.waitErrors(6)
	h.Expect()
	if h.rec.label("Thing", "shop", "kept") != "1" {
		t.Errorf("the objects of a file that became a broken link were not kept")
	}
	// The linked file's changes are followed (through the rescan: it lives elsewhere).
	manifesttest.WriteAtomic(t, filepath.Join(outside, "target.yaml"), thingYAML("shop", "linked", "2"))
	h.Expect("+Thing shop/linked")
}

// TestDirReplaced checks that a directory replaced as `rm -rf d && cp -r src d` does, and
// one moved away and back, is followed within the rescan period, and that what it held
// is kept while it is away.
func TestDirReplaced(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "d")
	h := newHarness(t, dir, map[string]string{"a.yaml": thingYAML("shop", "a", "1"), "sub/b.yaml": thingYAML("shop", "b", "1")},
		func(c *Config) { c.Rescan = 200 * time.Millisecond })
	h.run()
	h.Expect("+Thing shop/a", "+Thing shop/b")

	src := filepath.Join(parent, "src")
	manifesttest.WriteAtomic(t, filepath.Join(src, "a.yaml"), thingYAML("shop", "a", "2"))
	manifesttest.WriteAtomic(t, filepath.Join(src, "sub", "c.yaml"), thingYAML("shop", "c", "1"))
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(dir, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	h.Expect("+Thing shop/a", "-Thing shop/b", "+Thing shop/c")
	h.Write("sub/c.yaml", thingYAML("shop", "c", "2"))
	h.Expect("+Thing shop/c")

	// Moved away: nothing is deleted, and the problem is reported.
	away := filepath.Join(parent, "away")
	if err := os.Rename(dir, away); err != nil {
		t.Fatal(err)
	}
	h.waitErrors(1)
	h.Expect()
	if errs := errStrings(h.d.Errors()); !strings.HasPrefix(errs[0], dir+": cannot read the directory; keeping what was loaded from it:") {
		t.Errorf("Errors() = %q", errs)
	}
	if h.d.Ready() != nil {
		t.Errorf("not ready while serving the last good state")
	}
	manifesttest.WriteAtomic(t, filepath.Join(away, "a.yaml"), thingYAML("shop", "a", "3"))
	if err := os.Rename(away, dir); err != nil {
		t.Fatal(err)
	}
	h.Expect("+Thing shop/a")
	h.errorsAre()
	h.Write("a.yaml", thingYAML("shop", "a", "4"))
	h.Expect("+Thing shop/a")
}

func TestDirUnreadableSubdirectory(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("permissions do not stop root")
	}
	h := startDir(t, map[string]string{"sub/a.yaml": thingYAML("shop", "a", "1")}, nil)
	h.Expect("+Thing shop/a")
	sub := filepath.Join(h.Dir, "sub")
	if err := os.Chmod(sub, 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Chmod(sub, 0o755) })
	h.waitErrors(1)
	h.Expect()
	h.errorsAre("sub: cannot read; keeping what was loaded from it: permission denied")
}

func TestDirRunErrors(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	d := NewDir(DefaultConfig(filepath.Join(t.TempDir(), "missing")), testDecoder(), nil, nil)
	if err := d.Run(ctx, func(Update) {}); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("Run on a missing directory = %v, want an error naming it", err)
	}
	if d.Synced() || d.Ready() == nil {
		t.Errorf("synced or ready after a failed start")
	}
	file := filepath.Join(t.TempDir(), "f.yaml")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := NewDir(DefaultConfig(file), testDecoder(), nil, nil).Run(ctx, func(Update) {}); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("Run on a file = %v, want 'not a directory'", err)
	}
	h := startDir(t, nil, nil)
	if err := h.d.Run(ctx, func(Update) {}); err == nil || !strings.Contains(err.Error(), "already running") {
		t.Errorf("a second Run = %v", err)
	}
}

// TestDirSharedGauge checks that two Dirs of one process share manifest_errors.
func TestDirSharedGauge(t *testing.T) {
	a := startDir(t, map[string]string{"x.yaml": "just text\n"}, nil)
	b := newHarness(t, t.TempDir(), map[string]string{"y.yaml": "just text\n"}, nil)
	b.reg = a.reg
	b.d = NewDir(b.d.cfg, testDecoder(), a.reg, nil)
	b.run()
	a.waitErrors(1)
	b.waitErrors(1)
	if a.gauge("x.yaml") != 1 || b.gauge("y.yaml") != 1 {
		t.Errorf("manifest_errors: %v %v", a.gauge("x.yaml"), b.gauge("y.yaml"))
	}
	if n := promtest.CollectAndCount(b.d.report.gauge, "manifest_errors"); n != 2 {
		t.Errorf("the gauge holds %d series, want 2", n)
	}
}

func BenchmarkDirScanNoChange(b *testing.B) {
	dir := b.TempDir()
	data, err := os.ReadFile(filepath.Join("..", "..", "deploy", "examples", "shop.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "shop.yaml"), data, 0o644); err != nil {
		b.Fatal(err)
	}
	dec := testDecoder()
	dec.PassUnknown = true
	d := NewDir(DefaultConfig(dir), dec, nil, nil)
	d.files, d.delivered, d.initial = map[string]*fileState{}, map[Key]Object{}, true
	d.scan(func(Update) {})
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		d.scan(func(Update) {})
	}
}
