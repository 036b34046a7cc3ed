package detect

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/meridian-mesh/meridian/internal/testutil"
)

// pair returns both ends of a loopback TCP connection, closed when t ends.
func pair(t testing.TB) (client, server net.Conn) {
	t.Helper()
	server, client = testutil.TCPPair(t)
	return client, server
}

// peek runs Peek on server within 5 s (a test's bound; Peek's own timeout is cfg's).
func peek(t *testing.T, ctx context.Context, server net.Conn, cfg Config) (Result, error) {
	t.Helper()
	type out struct {
		r   Result
		err error
	}
	done := make(chan out, 1)
	go func() { r, err := Peek(ctx, server, cfg); done <- out{r, err} }()
	o := testutil.Recv(t, done, 5*time.Second, "Peek")
	return o.r, o.err
}

func readAll(t *testing.T, c net.Conn, n int) string {
	t.Helper()
	if err := c.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.SetReadDeadline(time.Time{}) }()
	buf := make([]byte, n)
	if _, err := io.ReadFull(c, buf); err != nil {
		t.Fatalf("read %d bytes: %v", n, err)
	}
	return string(buf)
}

func TestPeekOverLoopback(t *testing.T) {
	long := "GET /" + strings.Repeat("a", DefaultMaxBytes) + " HTTP/1.1\r\n"
	cases := []struct {
		name     string
		writes   []string
		closeW   bool // the client half-closes after writing
		cfg      Config
		want     Protocol
		timedOut bool
		bound    bool
	}{
		{"http1 in pieces", []string{"GE", "T /x HT", "TP/1.1\r\nHost: a\r\n\r\n"}, false, DefaultConfig(), HTTP1, false, false},
		{"h2 preface", []string{Preface[:5], Preface[5:] + "\x00\x00\x00\x04\x00\x00\x00\x00\x00"}, false, DefaultConfig(), HTTP2, false, false},
		{"tls is opaque at once", []string{"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03"}, false, DefaultConfig(), Opaque, false, false},
		// What could still begin a request line when no more comes is HTTP/1, as
		// linkerd2-proxy takes a partial line: never opaque bytes past the HTTP handling.
		{"stalled request line times out", []string{"GET /"}, false, Config{Timeout: 50 * time.Millisecond}, HTTP1, true, false},
		{"silent client times out", nil, false, Config{Timeout: 50 * time.Millisecond}, Opaque, true, false},
		{"empty lines only, then a stall", []string{"\r\n\n"}, false, Config{Timeout: 50 * time.Millisecond}, HTTP1, true, false},
		{"empty lines over the bound", []string{strings.Repeat("\r\n", DefaultMaxBytes)}, false, DefaultConfig(), HTTP1, false, true},
		{"partial line then end of stream", []string{"GET / HT"}, true, DefaultConfig(), HTTP1, false, false},
		{"binary then end of stream", []string{"\x00\x01"}, true, DefaultConfig(), Opaque, false, false},
		{"request then end of stream", []string{"GET / HTTP/1.0\r\n\r\n"}, true, DefaultConfig(), HTTP1, false, false},
		{"request line over the bound", []string{long}, false, DefaultConfig(), HTTP1, false, true},
		{"small bound", []string{"GET /abcdef HTTP/1.1\r\n"}, false, Config{MaxBytes: 8}, HTTP1, false, true},
		{"empty lines before the request", []string{"\r\n", "\nGET / HTTP/1.1\r\nHost: a\r\n\r\n"}, false, DefaultConfig(), HTTP1, false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			client, server := pair(t)
			sent := strings.Join(tc.writes, "")
			go func() { // the writes are small enough to fit the socket buffers
				for _, w := range tc.writes {
					_, _ = client.Write([]byte(w))
				}
				if tc.closeW {
					_ = client.(*net.TCPConn).CloseWrite()
				}
			}()
			res, err := peek(t, context.Background(), server, tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			if res.Protocol != tc.want || res.TimedOut != tc.timedOut || res.BoundReached != tc.bound {
				t.Fatalf("got %v timedOut=%v bound=%v, want %v %v %v",
					res.Protocol, res.TimedOut, res.BoundReached, tc.want, tc.timedOut, tc.bound)
			}
			// The Conn replays everything from the first byte, then the rest of the stream.
			if !strings.HasPrefix(sent, string(res.Conn.Peeked())) {
				t.Fatalf("peeked %q is not a prefix of what was sent", short(string(res.Conn.Peeked())))
			}
			got := readAll(t, res.Conn, len(sent))
			if got != sent {
				t.Fatalf("replayed %q, want %q", short(got), short(sent))
			}
			if !tc.closeW { // the read deadline is cleared: later bytes arrive normally
				if _, err := client.Write([]byte("more")); err != nil {
					t.Fatal(err)
				}
				if got := readAll(t, res.Conn, 4); got != "more" {
					t.Fatalf("after the replay read %q", got)
				}
			}
		})
	}
}

// TestPeekThenServeHTTP hands the replaying Conn to net/http's request reader.
func TestPeekThenServeHTTP(t *testing.T) {
	client, server := pair(t)
	go func() {
		_, _ = client.Write([]byte("POST /items HTTP/1.1\r\nHost: web\r\nContent-Length: 5\r\n\r\nhello"))
	}()
	res, err := peek(t, context.Background(), server, DefaultConfig())
	if err != nil || res.Protocol != HTTP1 {
		t.Fatalf("Peek: %v, %v", res.Protocol, err)
	}
	req, err := http.ReadRequest(bufio.NewReader(res.Conn))
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(req.Body)
	if err != nil || req.Method != "POST" || req.URL.Path != "/items" || req.Host != "web" || string(body) != "hello" {
		t.Fatalf("request %s %s host %q body %q err %v", req.Method, req.URL, req.Host, body, err)
	}
}

func TestPeekErrors(t *testing.T) {
	t.Run("closed before any byte", func(t *testing.T) {
		client, server := pair(t)
		_ = client.Close()
		res, err := peek(t, context.Background(), server, DefaultConfig())
		if !errors.Is(err, io.EOF) || len(res.Conn.Peeked()) != 0 {
			t.Fatalf("err %v, peeked %q; want io.EOF and nothing", err, res.Conn.Peeked())
		}
	})
	t.Run("context ends while waiting", func(t *testing.T) {
		client, server := pair(t)
		ctx, cancel := context.WithCancel(context.Background())
		if _, err := client.Write([]byte("GET")); err != nil {
			t.Fatal(err)
		}
		time.AfterFunc(20*time.Millisecond, cancel)
		res, err := peek(t, ctx, server, DefaultConfig())
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err %v, want context.Canceled", err)
		}
		// Nothing is lost, and the deadline Peek moved to stop the read is cleared.
		if _, err := client.Write([]byte("!")); err != nil {
			t.Fatal(err)
		}
		if got := readAll(t, res.Conn, 4); got != "GET!" {
			t.Fatalf("read %q after a cancelled Peek", got)
		}
	})
	t.Run("context already ended", func(t *testing.T) {
		_, server := pair(t)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := peek(t, ctx, server, DefaultConfig()); !errors.Is(err, context.Canceled) {
			t.Fatalf("err %v, want context.Canceled", err)
		}
	})
	t.Run("closed connection", func(t *testing.T) {
		_, server := pair(t)
		_ = server.Close()
		if _, err := peek(t, context.Background(), server, DefaultConfig()); err == nil {
			t.Fatal("Peek on a closed conn succeeded")
		}
	})
}

func TestConnWriteToAndCloseWrite(t *testing.T) {
	client, server := pair(t)
	c := NewConn(server, []byte("peeked:"))
	go func() {
		_, _ = client.Write([]byte("rest"))
		_ = client.(*net.TCPConn).CloseWrite()
	}()
	var out bytes.Buffer
	if n, err := io.Copy(&out, c); err != nil || out.String() != "peeked:rest" || n != 11 {
		t.Fatalf("io.Copy = %d, %v, %q", n, err, out.String())
	}
	if err := c.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	_ = client.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := client.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("after CloseWrite the client read %v, want EOF", err)
	}
	if c.NetConn() != server || len(c.Peeked()) != 0 {
		t.Fatal("NetConn/Peeked after the replay")
	}
	p1, p2 := net.Pipe()
	defer p1.Close()
	defer p2.Close()
	if err := NewConn(p1, nil).CloseWrite(); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("CloseWrite on a pipe: %v, want ErrUnsupported", err)
	}
}

// BenchmarkPeek is the cost detection adds to an accepted connection: one request line
// over loopback, peeked and replayed; with a context that never ends and with one that can.
func BenchmarkPeek(b *testing.B) {
	cancelable, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, bc := range []struct {
		name string
		ctx  context.Context
	}{{"background", context.Background()}, {"cancelable", cancelable}} {
		b.Run(bc.name, func(b *testing.B) {
			client, server := pair(b)
			req := []byte("GET /api/v1/items HTTP/1.1\r\nHost: web.shop.svc.cluster.local:8080\r\n\r\n")
			buf := make([]byte, len(req))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := client.Write(req); err != nil {
					b.Fatal(err)
				}
				res, err := Peek(bc.ctx, server, DefaultConfig())
				if err != nil || res.Protocol != HTTP1 {
					b.Fatal(res.Protocol, err)
				}
				if _, err := io.ReadFull(res.Conn, buf); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
