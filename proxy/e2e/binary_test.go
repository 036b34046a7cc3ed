package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"
)

// meridianBinary builds ./cmd/meridian (once per test binary) into a directory every user
// may read.
func meridianBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "meridian-e2e-bin")
		if err != nil {
			binErr = err
			return
		}
		binDir = dir
		_ = os.Chmod(dir, 0o755)
		bin := filepath.Join(dir, "meridian")
		ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/meridian")
		cmd.Dir = moduleRoot()
		if out, err := cmd.CombinedOutput(); err != nil {
			binErr = fmt.Errorf("go build ./cmd/meridian: %v\n%s", err, out)
			return
		}
		binPath = bin
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

var (
	binOnce         sync.Once
	binPath, binDir string
	binErr          error
)

// removeBinary removes what meridianBinary built; TestMain calls it.
func removeBinary() {
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
}

// moduleRoot is the repository's root (this file is in proxy/e2e).
func moduleRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(filepath.Dir(file)))
}
