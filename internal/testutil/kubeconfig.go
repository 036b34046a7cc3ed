package testutil

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// WriteKubeconfig writes at path (making its directory) a kubeconfig whose current context
// reaches server (a URL) as a user with the bearer token "abc"; it fails t when it cannot. It
// is for tests of how a command finds and reads its configuration: nothing answers at server
// (internal/kubetest runs a real API server).
func WriteKubeconfig(t testing.TB, path, server string) {
	t.Helper()
	writeKubeconfig(t, path, "{server: "+strconv.Quote(server)+"}")
}

// WriteKubeconfigInsecure is WriteKubeconfig for an HTTPS server whose certificate the client
// does not verify (insecure-skip-tls-verify): an httptest TLS server standing in for an API
// server that misbehaves.
func WriteKubeconfigInsecure(t testing.TB, path, server string) {
	t.Helper()
	writeKubeconfig(t, path, "{server: "+strconv.Quote(server)+", insecure-skip-tls-verify: true}")
}

func writeKubeconfig(t testing.TB, path, cluster string) {
	t.Helper()
	config := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: %s
users:
- name: u
  user: {token: abc}
contexts:
- name: x
  context: {cluster: c, user: u}
current-context: x
`, cluster)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
}
