package testutil

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// buildWithin bounds a build of the meridian binary (a cold cache under -race on a loaded
// machine takes minutes).
const buildWithin = 8 * time.Minute

// GoBuildMeridian builds the module's ./cmd/meridian to the executable path. The error
// carries go build's output. For tests that run the binary as a child process (a test
// binary cannot stand in for it).
func GoBuildMeridian(path string) error {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return fmt.Errorf("go build ./cmd/meridian: cannot find the module root")
	}
	ctx, cancel := context.WithTimeout(context.Background(), buildWithin)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", path, "./cmd/meridian")
	cmd.Dir = filepath.Join(filepath.Dir(file), "..", "..") // this file is internal/testutil/gobuild.go
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./cmd/meridian: %v\n%s", err, out)
	}
	return nil
}

// BuildMeridian builds ./cmd/meridian into t's temporary directory and returns its path; it
// fails t when the build fails.
func BuildMeridian(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "meridian")
	if err := GoBuildMeridian(bin); err != nil {
		t.Fatal(err)
	}
	return bin
}
