package admin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/meridian-mesh/meridian/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.Main(m, nil)) }

func TestAdminEndpoints(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "admin_test_total", Help: "t"})
	reg.MustRegister(c)
	c.Inc()
	var ready atomic.Bool
	lis := testutil.Listen(t)
	testutil.Go(t, "the admin server", func(ctx context.Context) error {
		return Serve(ctx, lis, Handler(reg, func() error {
			if !ready.Load() {
				return errors.New("source not synced")
			}
			return nil
		}))
	})
	base := "http://" + lis.Addr().String()
	client := &http.Client{Timeout: 5 * time.Second}
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := client.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := get("/live"); code != 200 {
		t.Fatalf("/live = %d", code)
	}
	if code, body := get("/ready"); code != 503 || !strings.Contains(body, "source not synced") {
		t.Fatalf("/ready before sync = %d %q", code, body)
	}
	ready.Store(true)
	if code, _ := get("/ready"); code != 200 {
		t.Fatalf("/ready after sync = %d", code)
	}
	if code, body := get("/metrics"); code != 200 || !strings.Contains(body, "admin_test_total 1") {
		t.Fatalf("/metrics = %d %q", code, body)
	}
	if code, _ := get("/debug/pprof/"); code != 200 {
		t.Fatalf("/debug/pprof/ = %d", code)
	}
}

func TestReadyShowsWarningsAndPprofIsOptional(t *testing.T) {
	h := NewHandler(prometheus.NewRegistry(), Options{
		Ready:    func() error { return nil },
		Warnings: func() []string { return []string{"manifest: a.yaml:3: yaml: did not find expected key"} },
	})
	for _, c := range []struct {
		path, want string
		code       int
	}{
		{"/ready", "ready\nwarnings:\n  manifest: a.yaml:3: yaml: did not find expected key\n", 200},
		{"/debug/pprof/", "404 page not found\n", 404},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", c.path, nil))
		if rec.Code != c.code || rec.Body.String() != c.want {
			t.Errorf("GET %s = %d %q, want %d %q", c.path, rec.Code, rec.Body.String(), c.code, c.want)
		}
	}
}

// TestReadyBoundsWarnings: /ready lists MaxReadyWarnings warnings and counts the rest.
func TestReadyBoundsWarnings(t *testing.T) {
	ws := make([]string, MaxReadyWarnings+7)
	for i := range ws {
		ws[i] = fmt.Sprintf("Server ns/s%d: invalid", i)
	}
	h := NewHandler(prometheus.NewRegistry(), Options{Warnings: func() []string { return ws }})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/ready", nil))
	lines := strings.Split(strings.TrimSuffix(rec.Body.String(), "\n"), "\n")
	if len(lines) != 2+MaxReadyWarnings+1 || lines[len(lines)-2] != fmt.Sprintf("  Server ns/s%d: invalid", MaxReadyWarnings-1) ||
		lines[len(lines)-1] != "  ... and 7 more (each was logged at warn when it appeared)" {
		t.Errorf("/ready = %d lines, ending %q", len(lines), lines[max(0, len(lines)-2):])
	}
}

// /metrics answers uncompressed even to a scraper offering gzip (as Prometheus does): the
// compressor a gzip'd answer needs would stay in the process's heap after the scrape.
func TestMetricsUncompressed(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "admin_test_total", Help: "t"})
	reg.MustRegister(c)
	srv := httptest.NewServer(NewHandler(reg, Options{}))
	defer srv.Close()
	req, err := http.NewRequest(http.MethodGet, srv.URL+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept-Encoding", "gzip") // set by hand: the transport then does not decode
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if enc := resp.Header.Get("Content-Encoding"); enc != "" || !strings.Contains(string(b), "admin_test_total 0") {
		t.Fatalf("/metrics: Content-Encoding %q, body %.64q", enc, b)
	}
}

// TestServeEndsRequestsInFlight: a request still running when the 5 s shutdown bound is over
// (a /debug/pprof/profile?seconds=30) has its connection closed and its context cancelled;
// before, Serve returned and left it running, with no one to wait for it.
func TestServeEndsRequestsInFlight(t *testing.T) {
	lis := testutil.Listen(t)
	entered, ended := make(chan struct{}), make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		select { // as pprof's profile runs: for its duration, unless the request ends
		case <-r.Context().Done():
		case <-time.After(2 * time.Minute):
		}
		close(ended)
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, lis, h) }()
	got := make(chan struct{})
	go func() {
		defer close(got)
		if res, err := http.Get("http://" + lis.Addr().String() + "/"); err == nil {
			res.Body.Close()
		}
	}()
	<-entered
	cancel()
	for name, ch := range map[string]<-chan struct{}{"Serve to return": chanOf(done), "the handler to end": ended, "the client to have its answer": got} {
		select {
		case <-ch:
		case <-time.After(30 * time.Second):
			t.Fatalf("waited 30s for %s", name)
		}
	}
}

// chanOf is closed once a value arrives on c.
func chanOf(c <-chan error) <-chan struct{} {
	out := make(chan struct{})
	go func() { <-c; close(out) }()
	return out
}
