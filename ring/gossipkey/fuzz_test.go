package gossipkey

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meridian-mesh/meridian/ring"
)

// FuzzLoad writes arbitrary key files, as --gossip-key-file and as a keys directory (the
// primary and two accepted keys), and loads them. Load never panics; it accepts exactly what
// ring.ParseGossipKey accepts in a file of at most maxKeyFile bytes, with the same key; a
// directory's accepted keys are the other files' keys in name order without the primary or
// a repeat; and no error quotes a key file's content.
func FuzzLoad(f *testing.F) {
	f.Add([]byte(b64(key(1))), []byte(b64(key(2))), []byte(b64(key(3))))
	f.Add([]byte(b64(key(1))), []byte(b64(key(1))), []byte(b64(key(2))))
	f.Add([]byte(b64(key(1))), []byte(b64(key(2))), []byte(b64(key(2))))
	f.Add(key(1), []byte("0123456789abcdef"), []byte(" 0123456789abcdef0123456789abcdef\n"))
	f.Add([]byte("not a key"), []byte(b64(key(2))), []byte{})
	f.Add([]byte(b64(key(1))), []byte("secret-looking-garbage-value-xyz"), []byte(b64(key(3))))
	f.Add(bytes.Repeat([]byte("A"), maxKeyFile+1), []byte{}, []byte{})
	dir := f.TempDir()
	keysDir := filepath.Join(dir, "keys")
	if err := os.Mkdir(keysDir, 0o755); err != nil {
		f.Fatal(err)
	}
	single := filepath.Join(dir, "single.key")
	names := []string{PrimaryName, "accepted-1.key", "accepted-2.key"}
	f.Fuzz(func(t *testing.T, primary, acc1, acc2 []byte) {
		contents := [][]byte{primary, acc1, acc2}
		want := make([][]byte, len(contents))
		wantOK := true
		for i, c := range contents {
			if err := os.WriteFile(filepath.Join(keysDir, names[i]), c, 0o600); err != nil {
				t.Fatal(err)
			}
			k, err := ring.ParseGossipKey(c)
			if err != nil || len(c) > maxKeyFile {
				wantOK = false
				continue
			}
			want[i] = k
		}
		quotes := func(err error) {
			msg := err.Error()
			for _, c := range contents {
				if s := strings.TrimSpace(string(c)); len(s) >= 8 && strings.Contains(msg, s) && !strings.Contains(dir, s) {
					t.Fatalf("error quotes a key file: %v", err)
				}
			}
		}

		if err := os.WriteFile(single, primary, 0o600); err != nil {
			t.Fatal(err)
		}
		ks, err := Load(Files{File: single})
		switch {
		case err != nil:
			quotes(err)
			if want[0] != nil {
				t.Fatalf("a valid key file refused: %v", err)
			}
		case want[0] == nil:
			t.Fatalf("an invalid key file (%d bytes) accepted", len(primary))
		case !ks.Equal(Keys{Primary: want[0]}):
			t.Fatalf("key file: got %x, want %x", ks.Primary, want[0])
		}

		ks, err = Load(Files{Dir: keysDir})
		if err != nil {
			quotes(err)
			if wantOK {
				t.Fatalf("a valid keys directory refused: %v", err)
			}
			return
		}
		if !wantOK {
			t.Fatal("a keys directory with an invalid file accepted")
		}
		exp := Keys{Primary: want[0]}
		for _, k := range want[1:] {
			dup := bytes.Equal(k, want[0])
			for _, a := range exp.Accepted {
				dup = dup || bytes.Equal(k, a)
			}
			if !dup {
				exp.Accepted = append(exp.Accepted, k)
			}
		}
		if !ks.Equal(exp) {
			t.Fatalf("keys directory: got %x, want %x", ks, exp)
		}
	})
}
