package main

import (
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meridian-mesh/meridian/internal/testutil"
)

func TestCheckUsageErrors(t *testing.T) {
	for _, args := range [][]string{{"check", "-o", "yaml"}, {"check", "extra"}, {"check", "--timeout", "0s"},
		{"check", "--timeout", "-5s"}, {"check", "--min-validity", "-5h"}, {"check", "--min-validity", "0s"}} {
		if code, _, errOut := capture(t, args...); code != 2 || !strings.Contains(errOut, "meridian check") {
			t.Errorf("meridian %s = exit %d %q, want 2", strings.Join(args, " "), code, errOut)
		}
	}
}

// TestCheckTimeoutCoversSilentAPIServer: against an API server that completes TLS and never
// answers, `meridian check --timeout 1s` gives up with its timeout and reports the API check
// failed (before, it waited for the server for good: the version request takes no context).
func TestCheckTimeoutCoversSilentAPIServer(t *testing.T) {
	stop := make(chan struct{})
	srv := httptest.NewTLSServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-stop }))
	t.Cleanup(srv.Close) // after close(stop), registered below: cleanups run last first
	t.Cleanup(func() { close(stop) })
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	testutil.WriteKubeconfigInsecure(t, kc, srv.URL)
	code, out, errOut := captureWithin(t, 30*time.Second, "check", "--kubeconfig", kc, "--timeout", "1s")
	// The request ends on the client's timeout ("Client.Timeout exceeded") or on the context
	// it is made with ("deadline exceeded"), whichever fires first.
	timedOut := strings.Contains(out, "Client.Timeout exceeded") || strings.Contains(out, "deadline exceeded")
	if code != 1 || !strings.Contains(out, "× can reach the Kubernetes API") || !timedOut {
		t.Errorf("exit %d, stdout %q, stderr %q; want 1 and the API check failed on the timeout", code, out, errOut)
	}
}
