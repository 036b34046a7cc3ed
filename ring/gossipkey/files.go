package gossipkey

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/meridian-mesh/meridian/ring"
)

// PrimaryName is the primary key's file in a keys directory (Files.Dir).
const PrimaryName = "gossip.key"

// maxKeyFile bounds a key file's size: a key in base64 is under 50 bytes, so anything
// larger is not a key file and is refused without being read in full.
const maxKeyFile = 4 << 10

// Files says where a replica's gossip keys are: exactly one of File and Dir.
type Files struct {
	// File holds the primary key, alone (--gossip-key-file).
	File string
	// Dir holds PrimaryName, the primary key, and any other "*.key" files, the accepted
	// keys (--gossip-keys-dir): a Secret with keys gossip.key and accepted-1.key, ...,
	// mounted whole. Names that start with "." and names without the .key suffix are
	// ignored.
	Dir string
}

// Paths returns what to watch for changes.
func (f Files) Paths() []string {
	if f.Dir != "" {
		return []string{f.Dir}
	}
	return []string{f.File}
}

// String names the files in messages.
func (f Files) String() string {
	if f.Dir != "" {
		return f.Dir
	}
	return f.File
}

// Keys is a set of gossip keys: the primary, which encrypts, and the accepted keys, which
// only decrypt. Accepted never holds the primary or a key twice.
type Keys struct {
	Primary  []byte
	Accepted [][]byte
}

// Equal reports whether k and o are the same set, in the same order.
func (k Keys) Equal(o Keys) bool {
	if !bytes.Equal(k.Primary, o.Primary) || len(k.Accepted) != len(o.Accepted) {
		return false
	}
	for i := range k.Accepted {
		if !bytes.Equal(k.Accepted[i], o.Accepted[i]) {
			return false
		}
	}
	return true
}

// Fingerprints names the keys in logs: the primary's fingerprint, then the accepted ones'.
func (k Keys) Fingerprints() (primary string, accepted []string) {
	for _, a := range k.Accepted {
		accepted = append(accepted, ring.KeyFingerprint(a))
	}
	return ring.KeyFingerprint(k.Primary), accepted
}

// Load reads the keys f names. The error names the file at fault; it never quotes a key.
func Load(f Files) (Keys, error) {
	switch {
	case f.File != "" && f.Dir != "":
		return Keys{}, errors.New("gossip keys: a key file and a keys directory: give one")
	case f.File != "":
		k, err := readKey(f.File)
		return Keys{Primary: k}, err
	case f.Dir != "":
		return loadDir(f.Dir)
	}
	return Keys{}, errors.New("gossip keys: no key file or keys directory")
}

// loadDir reads a keys directory (Files.Dir).
func loadDir(dir string) (Keys, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return Keys{}, fmt.Errorf("read gossip keys directory: %w", err)
	}
	var ks Keys
	for _, e := range entries { // sorted by name
		name := e.Name()
		if strings.HasPrefix(name, ".") || !strings.HasSuffix(name, ".key") {
			continue
		}
		k, err := readKey(filepath.Join(dir, name))
		if err != nil {
			return Keys{}, err
		}
		if name == PrimaryName {
			ks.Primary = k
			continue
		}
		ks.Accepted = append(ks.Accepted, k)
	}
	if ks.Primary == nil {
		return Keys{}, fmt.Errorf("gossip keys directory %s has no %s (the primary key)", dir, PrimaryName)
	}
	// The primary may also be listed as accepted, and a key twice: keep one of each.
	var accepted [][]byte
	for _, k := range ks.Accepted {
		dup := bytes.Equal(k, ks.Primary)
		for _, a := range accepted {
			dup = dup || bytes.Equal(k, a)
		}
		if !dup {
			accepted = append(accepted, k)
		}
	}
	ks.Accepted = accepted
	return ks, nil
}

// readKey reads one key file (following symbolic links, as a Secret volume's are).
func readKey(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read gossip key: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("read gossip key: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("gossip key %s: not a regular file (%s)", path, fi.Mode().Type())
	}
	b, err := io.ReadAll(io.LimitReader(f, maxKeyFile+1))
	if err != nil {
		return nil, fmt.Errorf("read gossip key %s: %w", path, err)
	}
	if len(b) > maxKeyFile {
		return nil, fmt.Errorf("gossip key %s: larger than %d bytes, not a key file", path, maxKeyFile)
	}
	k, err := ring.ParseGossipKey(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return k, nil
}
