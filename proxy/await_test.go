package proxy

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestAwait: Await returns once the admin server's /ready answers 200, and fails with the
// last answer when that does not happen within its timeout.
func TestAwait(t *testing.T) {
	var ready atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/ready" || !ready.Load() {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	err := Await(context.Background(), port, 300*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "503") {
		t.Errorf("not ready: %v, want an error saying 503", err)
	}
	time.AfterFunc(200*time.Millisecond, func() { ready.Store(true) })
	if err := Await(context.Background(), port, 10*time.Second); err != nil {
		t.Errorf("ready after 200 ms: %v", err)
	}
}
