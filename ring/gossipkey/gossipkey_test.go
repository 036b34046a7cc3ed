package gossipkey

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meridian-mesh/meridian/internal/testutil"
)

// memberlist's Shutdown does not wait for a probe in flight: let the last ones end.
func TestMain(m *testing.M) { os.Exit(testutil.Main(m, testutil.RunThenSettle(10*time.Second))) }

func key(b byte) []byte { return bytes.Repeat([]byte{b}, 32) }

func b64(k []byte) string { return base64.StdEncoding.EncodeToString(k) + "\n" }

// secretDir is a directory laid out as the kubelet lays out a Secret volume: each key a
// link to ..data/<key>, ..data a link to a timestamped directory, every update a new
// directory swapped in by renaming the ..data link (atomic), as Kubernetes' AtomicWriter.
type secretDir struct {
	t   *testing.T
	dir string
	gen int
}

func newSecretDir(t *testing.T, data map[string]string) *secretDir {
	s := &secretDir{t: t, dir: t.TempDir()}
	s.update(data)
	return s
}

func (s *secretDir) update(data map[string]string) {
	t := s.t
	t.Helper()
	s.gen++
	ts := fmt.Sprintf("..2026_01_01_00_00_%02d.%d", s.gen, s.gen)
	if err := os.Mkdir(filepath.Join(s.dir, ts), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, v := range data {
		if err := os.WriteFile(filepath.Join(s.dir, ts, name), []byte(v), 0o400); err != nil {
			t.Fatal(err)
		}
	}
	old, _ := os.Readlink(filepath.Join(s.dir, "..data"))
	tmp := filepath.Join(s.dir, "..data_tmp")
	if err := os.Symlink(ts, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(s.dir, "..data")); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(s.dir)
	for _, e := range entries { // links of keys gone
		if !strings.HasPrefix(e.Name(), ".") {
			if _, ok := data[e.Name()]; !ok {
				_ = os.Remove(filepath.Join(s.dir, e.Name()))
			}
		}
	}
	for name := range data {
		link := filepath.Join(s.dir, name)
		if _, err := os.Lstat(link); err == nil {
			continue
		}
		if err := os.Symlink(filepath.Join("..data", name), link); err != nil {
			t.Fatal(err)
		}
	}
	if old != "" {
		_ = os.RemoveAll(filepath.Join(s.dir, old))
	}
}

func TestLoad(t *testing.T) {
	A, B, C := key('A'), key('B'), key(0xfe) // C raw: not base64
	sd := newSecretDir(t, map[string]string{
		"gossip.key":       b64(A),
		"accepted-1.key":   b64(B),
		"accepted-2.key":   string(C), // raw bytes
		"accepted-dup.key": b64(A),    // the primary again: one key
		"README":           "not a key",
	})
	ks, err := Load(Files{Dir: sd.dir})
	if err != nil {
		t.Fatal(err)
	}
	if want := (Keys{Primary: A, Accepted: [][]byte{B, C}}); !ks.Equal(want) {
		t.Errorf("Load = %x %x, want %x %x", ks.Primary, ks.Accepted, want.Primary, want.Accepted)
	}
	file := filepath.Join(t.TempDir(), "gossip.key")
	if err := os.WriteFile(file, []byte(b64(B)), 0o600); err != nil {
		t.Fatal(err)
	}
	if ks, err := Load(Files{File: file}); err != nil || !ks.Equal(Keys{Primary: B}) {
		t.Errorf("Load(file) = %x %x, %v", ks.Primary, ks.Accepted, err)
	}

	bad := func(name string, mutate func(dir string)) {
		t.Helper()
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, PrimaryName), []byte(b64(A)), 0o600); err != nil {
			t.Fatal(err)
		}
		mutate(dir)
		_, err := Load(Files{Dir: dir})
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("Load: %v, want an error naming %s", err, name)
		}
		if err != nil && strings.Contains(err.Error(), "sekrit") {
			t.Errorf("error %q quotes the file's content", err)
		}
	}
	write := func(name, content string) func(string) {
		return func(dir string) {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	bad("accepted-1.key", write("accepted-1.key", "sekrit: not a key"))
	bad("accepted-big.key", write("accepted-big.key", strings.Repeat("sekrit", 1000)))
	bad("gossip.key", func(dir string) { _ = os.Remove(filepath.Join(dir, PrimaryName)) })
	bad("sub.key", func(dir string) { _ = os.Mkdir(filepath.Join(dir, "sub.key"), 0o700) })
	bad("dangling.key", func(dir string) { _ = os.Symlink("nowhere", filepath.Join(dir, "dangling.key")) })
	for _, f := range []Files{{}, {File: file, Dir: sd.dir}, {Dir: filepath.Join(t.TempDir(), "missing")}} {
		if _, err := Load(f); err == nil {
			t.Errorf("Load(%+v) succeeded", f)
		}
	}
}

// recordingTarget records what it is given; it refuses while refuse is set.
type recordingTarget struct {
	refuse atomic.Bool
	got    atomic.Pointer[Keys]
}

func (r *recordingTarget) SetGossipKeys(primary []byte, accepted ...[]byte) error {
	if r.refuse.Load() {
		return fmt.Errorf("refused")
	}
	r.got.Store(&Keys{Primary: primary, Accepted: accepted})
	return nil
}

func (r *recordingTarget) has(k Keys) bool {
	g := r.got.Load()
	return g != nil && g.Equal(k)
}
