package testutil

import (
	"compress/gzip"
	"io"
	"os"
)

// GunzipLen returns the length of the content of the gzipped file at path (a pprof profile
// is a gzipped protobuf: a test checks that one was written and is not empty).
func GunzipLen(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		return 0, err
	}
	return io.Copy(io.Discard, z)
}
