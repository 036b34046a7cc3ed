package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meridian-mesh/meridian/internal/testutil"
)

// freeAddr returns a loopback address no one listens on (a port just released).
func freeAddr(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	_ = lis.Close()
	return addr
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestDestinationReportsManifestErrors runs `meridian destination --source dir:` on a
// directory with one good and one broken file: it serves (ready) and says what is wrong in
// /ready's warnings and in the manifest_errors gauge.
func TestDestinationReportsManifestErrors(t *testing.T) {
	dir := t.TempDir()
	good, err := os.ReadFile("../../deploy/examples/shop.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "shop.yaml"), good, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bad.yaml"), []byte("apiVersion: v1\nkind: Service\nmetadata: {name: x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	admin := freeAddr(t)
	testutil.Go(t, "meridian destination", func(ctx context.Context) error {
		return runDestination(ctx, []string{"--source", "dir:" + dir, "--addr", "127.0.0.1:0", "--admin-addr", admin, "--log-level", "error"})
	})
	var body string
	testutil.Eventually(t, 20*time.Second, "/ready to answer 200", func() bool {
		var code int
		code, body = get(t, "http://"+admin+"/ready")
		return code == http.StatusOK
	})
	if !strings.Contains(body, "warnings:") || !strings.Contains(body, "bad.yaml:3:") {
		t.Errorf("/ready = %q, want a warning naming bad.yaml:3", body)
	}
	_, metrics := get(t, "http://"+admin+"/metrics")
	if want := `manifest_errors{file="` + filepath.Join(dir, "bad.yaml") + `"} 1`; !strings.Contains(metrics, want) {
		t.Errorf("/metrics lacks %s", want)
	}
}
