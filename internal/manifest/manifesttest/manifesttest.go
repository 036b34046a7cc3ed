package manifesttest

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meridian-mesh/meridian/internal/manifest/yamltext"
	"github.com/meridian-mesh/meridian/internal/testutil"
)

// Wait bounds every wait of Expect.
const Wait = 10 * time.Second

// WriteAtomic replaces the file p by a hidden temporary file renamed over it, as editors and
// kubectl-style tools do, so that no scan sees half a file; it creates p's directory.
func WriteAtomic(t testing.TB, p, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(filepath.Dir(p), ".tmp-"+filepath.Base(p))
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, p); err != nil {
		t.Fatal(err)
	}
}

// Events records what a directory follower delivered, one string an event ("+Kind ns/name",
// "-Kind ns/name"). It is safe for concurrent use; the zero value is ready.
type Events struct {
	mu     sync.Mutex
	events []string
}

// Add records events.
func (e *Events) Add(events ...string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.events = append(e.events, events...)
}

// Take returns and clears the events recorded so far.
func (e *Events) Take() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	ev := e.events
	e.events = nil
	return ev
}

// Expect waits until the events taken from e, sorted, equal want (sorted); then it calls
// settle, which waits for a few more scans of the follower, and checks that they added
// nothing.
func Expect(t testing.TB, e *Events, settle func(), want ...string) {
	t.Helper()
	var got []string
	want = append([]string(nil), want...)
	sort.Strings(want)
	testutil.Eventually(t, Wait, fmt.Sprintf("events %q", want), func() bool {
		got = append(got, e.Take()...)
		sort.Strings(got)
		if len(got) > len(want) {
			t.Fatalf("events:\n  got  %q\n  want %q", got, want)
		}
		return strings.Join(got, "\n") == strings.Join(want, "\n")
	})
	settle()
	if extra := e.Take(); len(extra) > 0 {
		t.Fatalf("redundant deliveries after %q: %q", want, extra)
	}
}

// IndentItem returns the YAML document doc as an item of a list ("- " before its first line,
// two spaces before the others).
func IndentItem(doc string) string {
	lines := strings.Split(strings.TrimSuffix(doc, "\n"), "\n")
	for i, l := range lines {
		if i == 0 {
			lines[i] = "- " + l
		} else {
			lines[i] = "  " + l
		}
	}
	return strings.Join(lines, "\n") + "\n"
}

// Seeds adds data and every *.yaml file of dir (the example manifests) to f's seed corpus.
func Seeds(f *testing.F, dir string, data ...string) {
	for _, s := range data {
		f.Add([]byte(s))
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
}

// Lines is the number of lines of data as the YAML decoder counts them: CRLF, a lone CR and
// LF each end a line, and so do NEL (U+0085), LS (U+2028) and PS (U+2029), which go-yaml's
// scanner takes as line breaks too (YAML 1.1). So a file with a lone CR has two lines.
// A file that starts with a UTF-16 byte order mark is read as UTF-16, as go-yaml reads it
// (so "\xfe\xff\x20\x29" is PS, a break).
func Lines(data []byte) int { return 1 + yamltext.Breaks(decodeUTF16(data)) }

// decodeUTF16 is data as text: UTF-16 when it starts with a byte order mark, as the YAML
// decoder reads it, else data as it is.
func decodeUTF16(data []byte) string {
	if s, ok := yamltext.UTF16(data); ok {
		return s
	}
	return string(data)
}

// CheckLocated fails t unless locate (manifest.Location) places every error in file, at a
// line of data (as Lines counts them).
func CheckLocated(t testing.TB, errs []error, file string, data []byte, locate func(error) (string, int, bool)) {
	t.Helper()
	lines := Lines(data)
	for _, e := range errs {
		if f, line, ok := locate(e); !ok || f != file || line < 1 || line > lines {
			t.Fatalf("error without a location in the file (%d lines): %#v", lines, e)
		}
	}
}

// Follower is the part of a directory follower's test harness that does not depend on the
// follower: its directory, what it delivered, and how many scans it has completed. A harness
// embeds it; set T to a subtest's t while the subtest runs.
type Follower struct {
	T      testing.TB
	Dir    string
	Events *Events
	Scans  func() int64
}

// Write replaces the file name of the directory atomically (WriteAtomic).
func (f *Follower) Write(name, content string) {
	f.T.Helper()
	WriteAtomic(f.T, filepath.Join(f.Dir, name), content)
}

// Remove removes the file name of the directory.
func (f *Follower) Remove(name string) {
	f.T.Helper()
	if err := os.Remove(filepath.Join(f.Dir, name)); err != nil {
		f.T.Fatal(err)
	}
}

// Settle waits until n more scans have completed, so that every change made before the call
// has been seen.
func (f *Follower) Settle(n int64) {
	f.T.Helper()
	target := f.Scans() + n
	testutil.Eventually(f.T, Wait, fmt.Sprintf("%d more scans", n), func() bool { return f.Scans() >= target })
}

// Expect waits until the events delivered, sorted, equal want (sorted), then checks that a
// few more scans add nothing (Expect).
func (f *Follower) Expect(want ...string) {
	f.T.Helper()
	Expect(f.T, f.Events, func() { f.Settle(3) }, want...)
}
