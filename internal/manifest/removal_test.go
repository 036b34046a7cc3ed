package manifest

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// TestRemovalIsConfirmed: a file that vanishes keeps its objects until a scan at least a
// debounce later still misses it, so a scan that catches `rm -rf d && cp -r src d` halfway
// deletes nothing that the rest of the copy brings back (for policy: opens no port).
func TestRemovalIsConfirmed(t *testing.T) {
	dir := t.TempDir()
	thingYAML := func(name string) string {
		return "apiVersion: v1\nkind: Thing\nmetadata: {name: " + name + "}\n"
	}
	for _, f := range []string{"a", "b"} {
		if err := os.WriteFile(filepath.Join(dir, f+".yaml"), []byte(thingYAML(f)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg := DefaultConfig(dir)
	cfg.Debounce = 50 * time.Millisecond
	d := NewDir(cfg, testDecoder(), nil, nil)
	d.files, d.delivered, d.initial = map[string]*fileState{}, map[Key]Object{}, true
	var r recorder
	if d.scan(r.deliver) {
		t.Fatal("the first scan has nothing to confirm")
	}
	r.Take()

	// Halfway through a replacement: b.yaml is missing for one scan, then back.
	b := filepath.Join(dir, "b.yaml")
	if err := os.Remove(b); err != nil {
		t.Fatal(err)
	}
	if !d.scan(r.deliver) {
		t.Error("a vanished file is not awaiting confirmation")
	}
	if ev := r.Take(); len(ev) != 0 {
		t.Errorf("a scan that missed b.yaml once delivered %q; want nothing", ev)
	}
	if err := os.WriteFile(b, []byte(thingYAML("b")), 0o644); err != nil {
		t.Fatal(err)
	}
	if d.scan(r.deliver) {
		t.Error("a file that came back still awaits confirmation")
	}
	if ev := r.Take(); len(ev) != 0 {
		t.Errorf("b.yaml back unchanged delivered %q; want nothing", ev)
	}

	// Really removed: a scan a debounce later confirms it.
	if err := os.Remove(b); err != nil {
		t.Fatal(err)
	}
	if !d.scan(r.deliver) {
		t.Fatal("a vanished file is not awaiting confirmation")
	}
	time.Sleep(cfg.Debounce) // the confirmation window itself, not a condition
	if d.scan(r.deliver) {
		t.Error("the removal is still pending after the debounce")
	}
	if ev := r.Take(); !slices.Equal(ev, []string{"-Thing default/b"}) {
		t.Errorf("confirmed removal delivered %q, want [-Thing default/b]", ev)
	}
}
