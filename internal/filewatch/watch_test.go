package filewatch

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meridian-mesh/meridian/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.Main(m, nil)) }

// start runs a watcher for cfg until the test ends and returns a counter of changed calls.
func start(t *testing.T, cfg Config) *atomic.Int64 {
	t.Helper()
	var n atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	w := New(cfg, nil)
	go func() { done <- w.Run(ctx, func() { n.Add(1) }) }()
	t.Cleanup(func() {
		cancel()
		if err := testutil.Recv(t, done, 5*time.Second, "watcher to stop"); err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return &n
}

func write(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// changedAfter performs act until the counter moves past what it was (a notification may be
// missed while the watch is being set up, so the act is repeated), within the deadline.
func changedAfter(t *testing.T, n *atomic.Int64, what string, act func()) {
	t.Helper()
	before := n.Load()
	calls := 0
	testutil.Eventually(t, 5*time.Second, what, func() bool {
		if n.Load() > before {
			return true
		}
		if calls%10 == 0 { // every 100 ms
			act()
		}
		calls++
		return false
	})
}

func noPoll(paths ...string) Config {
	cfg := Default(paths...)
	cfg.Poll = 0
	cfg.Debounce = 20 * time.Millisecond
	return cfg
}

func TestFileInDirectory(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "a.yaml"), "a")
	n := start(t, noPoll(dir))
	changedAfter(t, n, "a write to be noticed", func() { write(t, filepath.Join(dir, "a.yaml"), time.Now().String()) })
}

func TestWatchedFileReplacedByRename(t *testing.T) {
	dir := t.TempDir()
	crt := filepath.Join(dir, "tls.crt")
	write(t, crt, "one")
	n := start(t, noPoll(crt))
	changedAfter(t, n, "a rename over the file to be noticed", func() {
		tmp := filepath.Join(dir, ".tmp")
		write(t, tmp, time.Now().String())
		if err := os.Rename(tmp, crt); err != nil {
			t.Fatal(err)
		}
	})
}

// watchedDir starts a watcher without a poll on parent/d, which holds a.yaml, and checks that
// a write to a.yaml is noticed.
func watchedDir(t *testing.T) (parent, dir string, n *atomic.Int64) {
	t.Helper()
	parent = t.TempDir()
	dir = filepath.Join(parent, "d")
	write(t, filepath.Join(dir, "a.yaml"), "a")
	n = start(t, noPoll(dir))
	changedAfter(t, n, "the first write", func() { write(t, filepath.Join(dir, "a.yaml"), time.Now().String()) })
	return parent, dir, n
}

func TestDirectoryReplacedIsFollowed(t *testing.T) {
	_, dir, n := watchedDir(t)

	// rm -rf d && cp -r src d: without a poll, only the parent's watch can see it come back.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "b.yaml"), "b")
	changedAfter(t, n, "the replaced directory to be noticed", func() {})
	changedAfter(t, n, "a write in the replaced directory", func() { write(t, filepath.Join(dir, "b.yaml"), time.Now().String()) })
}

func TestDirectoryMovedAwayAndBack(t *testing.T) {
	parent, dir, n := watchedDir(t)
	away := filepath.Join(parent, "away")
	if err := os.Rename(dir, away); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(away, dir); err != nil {
		t.Fatal(err)
	}
	changedAfter(t, n, "a write after the move back", func() { write(t, filepath.Join(dir, "a.yaml"), time.Now().String()) })
}

func TestRecursiveSeesNewSubdirectory(t *testing.T) {
	dir := t.TempDir()
	cfg := noPoll(dir)
	cfg.Recursive = true
	n := start(t, cfg)
	changedAfter(t, n, "the watch to work", func() { write(t, filepath.Join(dir, "top.yaml"), time.Now().String()) })
	sub := filepath.Join(dir, "team", "x.yaml")
	write(t, sub, "x")
	// The subdirectory's creation is an event of the top directory; its own watch is added
	// on that change, after which writes inside it are seen.
	changedAfter(t, n, "the new subdirectory", func() {})
	changedAfter(t, n, "a write in the subdirectory", func() { write(t, sub, time.Now().String()) })
}

// TestRecursiveThroughSymlinkedRoot: a root that is a symbolic link to a directory (git-sync's
// /git/repo) has its subdirectories watched too, through the link; WalkDir does not follow
// its root, so before, a write in a subdirectory was seen only by the poll. And after the link
// moves to another directory (git-sync's next revision), that one's subdirectories are.
func TestRecursiveThroughSymlinkedRoot(t *testing.T) {
	base := t.TempDir()
	for _, rev := range []string{"rev1", "rev2"} {
		write(t, filepath.Join(base, rev, "team", "x.yaml"), rev)
	}
	link := filepath.Join(base, "repo")
	if err := os.Symlink("rev1", link); err != nil {
		t.Fatal(err)
	}
	if got, want := subdirs(link), []string{filepath.Join(link, "team")}; !slices.Equal(got, want) {
		t.Errorf("subdirs(link) = %q, want %q", got, want)
	}
	cfg := noPoll(link)
	cfg.Recursive = true
	n := start(t, cfg)
	changedAfter(t, n, "the watch to work", func() { write(t, filepath.Join(link, "top.yaml"), time.Now().String()) })
	changedAfter(t, n, "a write in a subdirectory through the link", func() { write(t, filepath.Join(link, "team", "x.yaml"), time.Now().String()) })
	// git-sync's swap: a new link renamed over the old one.
	if err := os.Symlink("rev2", filepath.Join(base, "repo.tmp")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(base, "repo.tmp"), link); err != nil {
		t.Fatal(err)
	}
	changedAfter(t, n, "the swap", func() {})
	changedAfter(t, n, "a write in the new revision's subdirectory", func() { write(t, filepath.Join(base, "rev2", "team", "x.yaml"), time.Now().String()) })
}

func TestMissingPathIsPolledUntilItAppears(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "later")
	cfg := Default(dir)
	cfg.Poll = 50 * time.Millisecond
	n := start(t, cfg)
	changedAfter(t, n, "a poll while the path is missing", func() {})
	write(t, filepath.Join(dir, "a.yaml"), "a")
	changedAfter(t, n, "a change once it exists", func() {})
}

func TestChmodAloneIsNotAChange(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "a.yaml")
	write(t, f, "a")
	n := start(t, noPoll(dir))
	changedAfter(t, n, "the watch to work", func() { write(t, f, time.Now().String()) })
	// Let the last burst settle, then a chmod must not count.
	last, stable := n.Load(), 0
	testutil.Eventually(t, 5*time.Second, "the burst to settle", func() bool {
		if cur := n.Load(); cur != last {
			last, stable = cur, 0
			return false
		}
		stable++
		return stable >= 20 // unchanged over 200 ms, ten debounce periods
	})
	before := n.Load()
	if err := os.Chmod(f, 0o600); err != nil {
		t.Fatal(err)
	}
	testutil.Never(t, 200*time.Millisecond, "a chmod counted as a change", func() bool { return n.Load() != before })
}

// TestInitialCallAfterWatches checks that with Initial, changed runs once at the start with
// the watches already in place: a write made from inside that first call is noticed without
// a poll and without repeating it.
func TestInitialCallAfterWatches(t *testing.T) {
	dir := t.TempDir()
	cfg := noPoll(dir)
	cfg.Initial = true
	var n atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- New(cfg, nil).Run(ctx, func() {
			if n.Add(1) == 1 {
				write(t, filepath.Join(dir, "a.yaml"), "written during the first call")
			}
		})
	}()
	t.Cleanup(func() {
		cancel()
		if err := testutil.Recv(t, done, 5*time.Second, "watcher to stop"); err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	testutil.Eventually(t, 5*time.Second, "the initial call and the write made in it", func() bool { return n.Load() >= 2 })
}

func TestAgainCallsOnceMore(t *testing.T) {
	dir := t.TempDir()
	var n atomic.Int64
	w := New(noPoll(dir), nil)
	testutil.Go(t, "the watcher", func(ctx context.Context) error {
		return w.Run(ctx, func() {
			if n.Add(1) < 3 {
				w.Again() // from within changed, as manifest.Dir does
			}
		})
	})
	w.Again()
	testutil.Eventually(t, 5*time.Second, "three calls from Again alone", func() bool { return n.Load() >= 3 })
	testutil.Never(t, 200*time.Millisecond, "a call nobody asked for", func() bool { return n.Load() > 3 })
}
