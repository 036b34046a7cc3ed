package bench

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// drivePhases drives phases on cfg as runOne does: counts set piecemeal, descriptions changed
// on the way, a phase of unknown length.
func drivePhases(cfg Config) {
	p := newPhase(cfg, 2, "shards=2: starting replicas", "replicas")
	p.set(1)
	p.set(2)
	p.done()
	p = newPhase(cfg, 2500, "shards=2: opening streams", "streams")
	for i := int64(0); i < 2500; i += 1000 {
		p.set(i)
	}
	p.set(2500)
	p.done()
	p = newPhase(cfg, 5000, "shards=2: churn 100/s", "ms")
	for ms := int64(0); ms < 5000; ms += 10 {
		p.set(ms)
		if ms == 2500 {
			p.describe("shards=2: storm of 20")
		}
	}
	p.set(5000)
	p.done()
	p = newPhase(cfg, -1, "shards=2: settling", "")
	p.describe("shards=2: settling, 3 streams behind")
	p.set(200)
	p.done()
	p.done() // a second call adds nothing
}

func TestPhaseNotATerminal(t *testing.T) {
	var b bytes.Buffer
	drivePhases(Config{Progress: &b})
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	want := []string{
		`shards=2: starting replicas: 2/2 replicas in \d+\.\ds`,
		`shards=2: opening streams: 2500/2500 streams in \d+\.\ds`,
		`shards=2: churn 100/s: 5000/5000 ms in \d+\.\ds`,
		`shards=2: settling in \d+\.\ds`,
	}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want one per phase (%d):\n%s", len(lines), len(want), b.String())
	}
	for i, re := range want {
		if !regexp.MustCompile(`^` + re + `$`).MatchString(lines[i]) {
			t.Errorf("line %d %q, want %s", i, lines[i], re)
		}
	}
}

func TestPhaseFileIsNotATerminal(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "progress"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if isTerminal(f) {
		t.Fatal("a regular file is a terminal")
	}
	drivePhases(Config{Progress: f})
	b, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(b, []byte("\n")); n != 4 || bytes.ContainsRune(b, '\r') {
		t.Fatalf("%d lines (want 4), carriage return %v:\n%q", n, bytes.ContainsRune(b, '\r'), b)
	}
}

func TestPhaseTerminal(t *testing.T) {
	var b bytes.Buffer
	p := newPhaseOn(&b, true, 10, "shards=1: opening streams", "streams")
	p.set(10)
	p.done()
	// The bar, redrawn in place, ended by a newline at completion.
	if out := b.String(); !strings.Contains(out, "\r") || !strings.Contains(out, "100%") || !strings.Contains(out, "(10/10)") || !strings.HasSuffix(out, "\n") {
		t.Fatalf("terminal output %q", out)
	}
}

func TestPhaseNoProgress(t *testing.T) {
	drivePhases(Config{}) // no writer: nothing to write to, nothing panics
}
