package h2

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2/hpack"

	"github.com/meridian-mesh/meridian/internal/testutil"
)

// echoHandler answers with what it received: method, path, authority and selected fields
// in headers, the body's length and digest, and trailers.
func echoHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", "X-Body-Sha256")
		h := sha256.New()
		n, err := io.Copy(h, r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("X-Seen", fmt.Sprintf("%s %s %s %d", r.Method, r.URL.RequestURI(), r.Host, n))
		w.Header().Set("X-Client-Id", strings.Join(r.Header.Values("L5d-Client-Id"), ","))
		w.Header().Set("X-Te", r.Header.Get("Te"))
		if r.URL.Path == "/big" {
			w.WriteHeader(http.StatusOK)
			chunk := bytes.Repeat([]byte("0123456789abcdef"), 4096) // 64 KiB
			for range 64 {
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
		} else {
			w.WriteHeader(http.StatusCreated)
			_, _ = io.WriteString(w, "hello")
		}
		w.Header().Set("X-Body-Sha256", fmt.Sprintf("%x", h.Sum(nil)))
	})
}

// TestRelayRequests: requests of every shape cross the relay unchanged: methods, paths,
// bodies from empty to larger than every window (in both directions), response headers,
// status, body and trailers; many at once on one connection.
func TestRelayRequests(t *testing.T) {
	up := upstreamServer(t, echoHandler())
	p := startRelay(t, up, Config{})
	c := h2Client(t, p.addr)
	big := bytes.Repeat([]byte("x"), 3<<20+17) // over the stream (256 KiB) and connection (1 MiB) windows
	for _, tc := range []struct {
		method, path string
		body         []byte
	}{
		{"GET", "/a?b=1", nil},
		{"POST", "/post", []byte("some body")},
		{"PUT", "/big", big},
		{"DELETE", "/x/y%2Fz", nil},
	} {
		req, _ := http.NewRequest(tc.method, "http://web.example:8080"+tc.path, bytes.NewReader(tc.body))
		res, err := c.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", tc.method, tc.path, err)
		}
		b, err := io.ReadAll(res.Body)
		res.Body.Close()
		if err != nil {
			t.Fatalf("%s %s: body: %v", tc.method, tc.path, err)
		}
		want := fmt.Sprintf("%s %s web.example:8080 %d", tc.method, tc.path, len(tc.body))
		sum := sha256.Sum256(tc.body)
		if got := res.Header.Get("X-Seen"); got != want || res.Trailer.Get("X-Body-Sha256") != fmt.Sprintf("%x", sum) {
			t.Errorf("%s %s: the upstream saw %q (want %q), digest %q", tc.method, tc.path, got, want, res.Trailer.Get("X-Body-Sha256"))
		}
		wantLen := 5
		if tc.path == "/big" {
			wantLen = 64 * 64 << 10
		}
		if len(b) != wantLen || res.ProtoMajor != 2 {
			t.Errorf("%s %s: %d %s, %d bytes of body", tc.method, tc.path, res.StatusCode, res.Proto, len(b))
		}
	}

	// Concurrent streams on one connection, each checked.
	var wg sync.WaitGroup
	errs := make(chan error, 50)
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := strings.Repeat("b", i*1000)
			res, err := c.Post("http://web.example/c"+fmt.Sprint(i), "text/plain", strings.NewReader(body))
			if err != nil {
				errs <- err
				return
			}
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if got, want := res.Header.Get("X-Seen"), fmt.Sprintf("POST /c%d web.example %d", i, len(body)); got != want {
				errs <- fmt.Errorf("stream %d: %q, want %q", i, got, want)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := len(p.ups); n != 1 {
		t.Errorf("%d upstream connections, want 1 (multiplexed)", n)
	}
	for _, o := range p.observers() {
		if err := testutil.Recv(t, o.done, wait, "the exchange's end"); err != nil {
			t.Errorf("an exchange ended with %v", err)
		}
	}
}

// TestRelayEditAndObserver: the edit drops and adds fields; the observer sees the status
// and the trailers; te: trailers passes.
func TestRelayEditAndObserver(t *testing.T) {
	up := upstreamServer(t, echoHandler())
	p := startRelay(t, up, Config{})
	p.edit = &Edit{Drop: []string{"l5d-client-id"}, Add: []hpack.HeaderField{{Name: "l5d-client-id", Value: "web.ns.serviceaccount"}}}
	c := h2Client(t, p.addr)
	req, _ := http.NewRequest("POST", "http://web/", strings.NewReader("abc"))
	req.Header.Set("L5d-Client-Id", "spoofed")
	req.Header.Set("Te", "trailers")
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.ReadAll(res.Body)
	res.Body.Close()
	if got := res.Header.Get("X-Client-Id"); got != "web.ns.serviceaccount" || res.Header.Get("X-Te") != "trailers" {
		t.Errorf("the upstream saw l5d-client-id %q, te %q", got, res.Header.Get("X-Te"))
	}
	o := p.observers()[0]
	if err := testutil.Recv(t, o.done, wait, "the exchange's end"); err != nil {
		t.Fatal(err)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.status != http.StatusCreated || o.trailers["x-body-sha256"] == "" {
		t.Errorf("observer: status %d, trailers %v", o.status, o.trailers)
	}
}

// TestRelayCancellation: a client that gives up on a streaming response resets its stream;
// the upstream's request ends, and the observer hears of it.
func TestRelayCancellation(t *testing.T) {
	upstreamDone := make(chan error, 1)
	up := upstreamServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		for {
			if _, err := io.WriteString(w, "tick\n"); err != nil {
				upstreamDone <- err
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				upstreamDone <- r.Context().Err()
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}))
	p := startRelay(t, up, Config{})
	c := h2Client(t, p.addr)
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://web/stream", nil)
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 5)
	if _, err := io.ReadFull(res.Body, buf); err != nil || string(buf) != "tick\n" {
		t.Fatalf("streaming: %q %v", buf, err)
	}
	cancel()
	res.Body.Close()
	if err := testutil.Recv(t, upstreamDone, wait, "the upstream to see the cancellation"); err == nil {
		t.Error("the upstream handler ended without an error")
	}
	if err := testutil.Recv(t, p.observers()[0].done, wait, "the exchange's end"); err == nil {
		t.Error("a cancelled exchange reported success")
	}
}

// TestRelayUpstreamFailure: an upstream that goes away fails its exchanges; the observer
// may answer the client (here with a 502), or the stream is reset.
func TestRelayUpstreamFailure(t *testing.T) {
	release := make(chan struct{})
	up := upstreamServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-release
	}))
	p := startRelay(t, up, Config{})
	c := h2Client(t, p.addr)
	errc := make(chan error, 1)
	go func() {
		res, err := c.Get("http://web/hang")
		if err == nil {
			res.Body.Close()
			if res.StatusCode < 500 {
				err = fmt.Errorf("status %d", res.StatusCode)
			} else {
				err = nil
			}
		} else {
			err = nil // a reset stream is a failure the client sees: fine
		}
		errc <- err
	}()
	testutil.Eventually(t, wait, "the request to reach the upstream", func() bool { return len(p.observers()) == 1 && p.ups != nil && p.ups[0].Streams() == 1 })
	p.mu.Lock()
	p.ups[0].Close()
	p.mu.Unlock()
	if err := testutil.Recv(t, p.observers()[0].done, wait, "the exchange's end"); err == nil {
		t.Error("an exchange whose upstream closed reported success")
	}
	if err := testutil.Recv(t, errc, wait, "the client's answer"); err != nil {
		t.Error(err)
	}
	close(release)
}

// TestRespond: a handler's own answer (an error, with a body) reaches the client, and a
// request body still coming is refused.
func TestRespond(t *testing.T) {
	p := startRelay(t, "127.0.0.1:1", Config{})
	p.answer = func(st *Stream) bool {
		st.Respond(http.StatusForbidden, []hpack.HeaderField{{Name: "l5d-proxy-error", Value: "denied"}, {Name: "content-type", Value: "text/plain"}},
			[]byte("denied "+st.Request().Path+"\n"))
		return true
	}
	c := h2Client(t, p.addr)
	for _, body := range []io.Reader{nil, strings.NewReader(strings.Repeat("z", 1<<20))} {
		res, err := c.Post("http://web/secret", "text/plain", body)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusForbidden || res.Header.Get("L5d-Proxy-Error") != "denied" || string(b) != "denied /secret\n" {
			t.Errorf("%d %v %q", res.StatusCode, res.Header, b)
		}
	}
}

// TestShutdown: after Shutdown, the stream in flight finishes; the connection then closes.
func TestShutdown(t *testing.T) {
	release := make(chan struct{})
	up := upstreamServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-release
		_, _ = io.WriteString(w, "late")
	}))
	lis := testutil.Listen(t)
	p := &relayProxy{pool: &Pool{}, up: up}
	served := make(chan *Conn, 1)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		nc, err := lis.Accept()
		if err != nil {
			return
		}
		sc := NewServerConn(nc, Config{}, p)
		served <- sc
		_ = sc.Serve()
	}()
	defer func() {
		_ = lis.Close()
		p.pool.Close()
		testutil.Wait(t, testutil.StopWithin, "the server", wg.Wait)
		testutil.Wait(t, testutil.StopWithin, "the relay", p.wg.Wait)
	}()
	c := h2Client(t, lis.Addr().String())
	got := make(chan string, 1)
	go func() {
		res, err := c.Get("http://web/slow")
		if err != nil {
			got <- err.Error()
			return
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		got <- string(b)
	}()
	sc := testutil.Recv(t, served, wait, "the connection")
	testutil.Eventually(t, wait, "the request in flight", func() bool { return sc.Streams() == 1 })
	sc.Shutdown()
	close(release)
	if b := testutil.Recv(t, got, wait, "the response"); b != "late" {
		t.Errorf("the request in flight got %q", b)
	}
	testutil.Wait(t, wait, "the connection to close", func() { <-sc.Done() })
}

// TestServeHTTP: the net/http-style slow path reads the request's body (larger than its
// window) and writes a response larger than the client's window, with trailers.
func TestServeHTTP(t *testing.T) {
	p := startRelay(t, "127.0.0.1:1", Config{})
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, err := io.Copy(io.Discard, r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Trailer", "X-Count")
		w.Header().Set("X-Seen", fmt.Sprintf("%s %s %s %d %s", r.Method, r.URL.Path, r.Host, n, r.Header.Get("X-A")))
		w.WriteHeader(http.StatusAccepted)
		chunk := bytes.Repeat([]byte("y"), 64<<10)
		for range 32 {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
		w.Header().Set("X-Count", "32")
	})
	p.answer = func(st *Stream) bool {
		p.wg.Add(1)
		go func() { defer p.wg.Done(); st.ServeHTTP(context.Background(), handler) }()
		return true
	}
	c := h2Client(t, p.addr)
	req, _ := http.NewRequest("POST", "http://web:81/local", bytes.NewReader(bytes.Repeat([]byte("x"), 1<<20)))
	req.Header.Set("X-A", "1")
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil || len(b) != 32*64<<10 {
		t.Fatalf("body: %d bytes, %v", len(b), err)
	}
	if res.StatusCode != http.StatusAccepted || res.Header.Get("X-Seen") != fmt.Sprintf("POST /local web:81 %d 1", 1<<20) || res.Trailer.Get("X-Count") != "32" {
		t.Errorf("%d %v trailers %v", res.StatusCode, res.Header, res.Trailer)
	}
}

// TestUpstreamGoAway: an upstream that goes away gracefully (GOAWAY) takes no new stream,
// and its connection closes once its streams are done; the next request dials again.
func TestUpstreamGoAway(t *testing.T) {
	lis := testutil.Listen(t)
	var pr http.Protocols
	pr.SetUnencryptedHTTP2(true)
	srv := &http.Server{Protocols: &pr, Handler: echoHandler()}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(lis) }()
	defer func() { _ = srv.Close(); <-done }()
	p := startRelay(t, lis.Addr().String(), Config{})
	c := h2Client(t, p.addr)
	res, err := c.Get("http://web/1")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	p.mu.Lock()
	first := p.ups[0]
	p.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	go func() { _ = srv.Shutdown(ctx) }() // GOAWAY, then close the idle connection
	testutil.Wait(t, wait, "the upstream connection to close", func() { <-first.Done() })
	if p.pool.Take() != nil {
		t.Error("the pool still offers a connection that went away")
	}
}
