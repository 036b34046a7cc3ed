package httpproxy

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/netip"
	"strings"
	"testing"
)

func TestReaderNext(t *testing.T) {
	origDst := netip.MustParseAddrPort("10.1.2.3:8080")
	cases := []struct {
		name    string
		in      string
		origDst netip.AddrPort
		form    Form
		target  Authority
		uri     string // the rewritten RequestURI
		host    string
	}{
		{"absolute-form", "GET http://web.shop.svc.cluster.local:8080/path?q=1 HTTP/1.1\r\nHost: ignored\r\nProxy-Connection: keep-alive\r\nProxy-Authorization: Basic eA==\r\n\r\n",
			netip.AddrPort{}, AbsoluteForm, Authority{"web.shop.svc.cluster.local", 8080}, "/path?q=1", "web.shop.svc.cluster.local:8080"},
		{"absolute-form, default port, empty path", "GET http://Web.Shop. HTTP/1.1\r\n\r\n",
			netip.AddrPort{}, AbsoluteForm, Authority{"web.shop", 80}, "/", "Web.Shop."},
		{"absolute-form over HTTP/1.0", "GET http://10.0.0.1:81/x HTTP/1.0\r\n\r\n",
			netip.AddrPort{}, AbsoluteForm, Authority{"10.0.0.1", 81}, "/x", "10.0.0.1:81"},
		{"absolute-form beats the original destination", "GET http://[::1]:9/ HTTP/1.1\r\n\r\n",
			origDst, AbsoluteForm, Authority{"::1", 9}, "/", "[::1]:9"},
		{"CONNECT", "CONNECT db.shop:5432 HTTP/1.1\r\nHost: db.shop:5432\r\n\r\n",
			netip.AddrPort{}, AuthorityForm, Authority{"db.shop", 5432}, "db.shop:5432", "db.shop:5432"},
		{"origin-form by Host", "GET /items HTTP/1.1\r\nHost: web.shop:8080\r\n\r\n",
			netip.AddrPort{}, OriginForm, Authority{"web.shop", 8080}, "/items", "web.shop:8080"},
		{"origin-form by Host, default port", "GET /items HTTP/1.1\r\nHost: web.shop\r\n\r\n",
			netip.AddrPort{}, OriginForm, Authority{"web.shop", 80}, "/items", "web.shop"},
		{"origin-form by original destination", "GET /items HTTP/1.1\r\nHost: web.shop\r\n\r\n",
			origDst, OriginForm, Authority{"10.1.2.3", 8080}, "/items", "web.shop"},
		{"origin-form without Host, original destination known", "GET / HTTP/1.0\r\n\r\n",
			origDst, OriginForm, Authority{"10.1.2.3", 8080}, "/", ""},
		{"OPTIONS *", "OPTIONS * HTTP/1.1\r\nHost: web:1\r\n\r\n",
			netip.AddrPort{}, OriginForm, Authority{"web", 1}, "*", "web:1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := NewReader(strings.NewReader(tc.in), Options{OrigDst: tc.origDst})
			req, err := r.Next()
			if err != nil {
				t.Fatal(err)
			}
			if req.Form != tc.form || req.Target != tc.target {
				t.Fatalf("%v %+v, want %v %+v", req.Form, req.Target, tc.form, tc.target)
			}
			if req.HTTP.RequestURI != tc.uri || req.HTTP.Host != tc.host {
				t.Fatalf("RequestURI %q Host %q, want %q %q", req.HTTP.RequestURI, req.HTTP.Host, tc.uri, tc.host)
			}
			if h := req.HTTP.Header; h.Get("Proxy-Connection") != "" || h.Get("Proxy-Authorization") != "" {
				t.Fatalf("headers for the proxy were kept: %v", h)
			}
			if tc.form == AbsoluteForm { // what would go to the server is plain origin-form
				var out bytes.Buffer
				if err := req.HTTP.Write(&out); err != nil {
					t.Fatal(err)
				}
				if want := "GET " + tc.uri + " HTTP/1.1\r\nHost: " + tc.host + "\r\n"; !strings.HasPrefix(out.String(), want) {
					t.Fatalf("forwarded as %q, want it to start %q", out.String(), want)
				}
			}
			if _, err := r.Next(); !errors.Is(err, io.EOF) {
				t.Fatalf("after the only request: %v, want io.EOF", err)
			}
		})
	}
}

func TestReaderRefuses(t *testing.T) {
	big := "GET / HTTP/1.1\r\nHost: web\r\nX-Big: " + strings.Repeat("a", DefaultMaxHeaderBytes) + "\r\n\r\n"
	many := "GET / HTTP/1.1\r\nHost: web\r\n" + strings.Repeat("X-A: b\r\n", DefaultMaxHeaderBytes/8+1) + "\r\n"
	// A head of exactly the bound is accepted.
	exact := "GET / HTTP/1.1\r\nHost: web\r\nX: "
	exact += strings.Repeat("a", DefaultMaxHeaderBytes-len(exact)-4) + "\r\n\r\n"
	if _, err := NewReader(strings.NewReader(exact+"GET / HTTP/1.1\r\n\r\n"), Options{}).Next(); err != nil {
		t.Fatalf("a head of exactly %d bytes: %v", len(exact), err)
	}
	if _, err := NewReader(strings.NewReader(exact[:3]+"x"+exact[3:]), Options{}).Next(); err == nil {
		t.Fatalf("a head of %d bytes was accepted", len(exact)+1)
	}
	cases := []struct {
		name, in string
		opts     Options
		status   int
		reason   string
	}{
		{"origin-form without Host", "GET / HTTP/1.0\r\n\r\n", Options{}, 400, "without Host"},
		{"origin-form with empty Host", "GET / HTTP/1.1\r\nHost: \r\n\r\n", Options{}, 400, "without Host"},
		{"bad port", "GET http://web:99999/ HTTP/1.1\r\n\r\n", Options{}, 400, "out of range"},
		{"port 0", "GET http://web:0/ HTTP/1.1\r\n\r\n", Options{}, 400, "out of range"},
		{"bad Host port", "GET / HTTP/1.1\r\nHost: web:x\r\n\r\n", Options{}, 400, "bad port"},
		{"CONNECT without port", "CONNECT web HTTP/1.1\r\nHost: web\r\n\r\n", Options{}, 400, "no port"},
		{"CONNECT to a path", "CONNECT /web HTTP/1.1\r\nHost: web:1\r\n\r\n", Options{}, 400, "host:port"},
		{"https scheme", "GET https://web/ HTTP/1.1\r\n\r\n", Options{}, 400, "CONNECT"},
		{"ftp scheme", "GET ftp://web/ HTTP/1.1\r\n\r\n", Options{}, 400, "scheme"},
		{"userinfo", "GET http://u:p@web/ HTTP/1.1\r\n\r\n", Options{}, 400, "userinfo"},
		{"no host", "GET http:///x HTTP/1.1\r\n\r\n", Options{}, 400, "no host"},
		{"IPv6 without brackets", "GET / HTTP/1.1\r\nHost: ::1\r\n\r\n", Options{}, 400, "brackets"},
		{"garbage", "hello\r\n\r\n", Options{}, 400, "malformed"},
		{"HTTP/2 preface", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", Options{}, 400, ""},
		{"bad header", "GET / HTTP/1.1\r\nHost web\r\n\r\n", Options{}, 400, "malformed"},
		{"one huge header", big, Options{}, 431, "over 65536 bytes"},
		{"many headers", many, Options{}, 431, "over 65536 bytes"},
		{"a small bound", "GET / HTTP/1.1\r\nHost: web\r\nX: " + strings.Repeat("a", 5000) + "\r\n\r\n", Options{MaxHeaderBytes: 1000}, 431, "over 1000 bytes"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewReader(strings.NewReader(tc.in), tc.opts).Next()
			var perr *Error
			if !errors.As(err, &perr) || perr.Status != tc.status || !strings.Contains(perr.Reason, tc.reason) {
				t.Fatalf("Next: %v; want %d with a reason about %q", err, tc.status, tc.reason)
			}
			if len(perr.Reason) > 200 {
				t.Fatalf("reason quotes too much: %d bytes", len(perr.Reason))
			}
			// The answer is a well-formed response that closes the connection.
			var out bytes.Buffer
			if err := perr.WriteResponse(&out); err != nil {
				t.Fatal(err)
			}
			resp, err := http.ReadResponse(bufio.NewReader(&out), nil)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.status || !resp.Close || string(body) != perr.Reason+"\n" {
				t.Fatalf("response %d close=%v body %q", resp.StatusCode, resp.Close, body)
			}
		})
	}
}

// countingReader counts the bytes the Reader pulls from the connection.
type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// TestReaderBoundsItsReads checks that an endless head costs no more than the bound.
func TestReaderBoundsItsReads(t *testing.T) {
	endless := io.MultiReader(strings.NewReader("GET / HTTP/1.1\r\nX: "), neverEnding('a'))
	c := &countingReader{r: endless}
	_, err := NewReader(c, Options{}).Next()
	var perr *Error
	if !errors.As(err, &perr) || perr.Status != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("Next: %v, want 431", err)
	}
	if max := DefaultMaxHeaderBytes + 2*bufSize; c.n > max {
		t.Fatalf("read %d bytes of an endless head, want at most %d", c.n, max)
	}
}

type neverEnding byte

func (b neverEnding) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(b)
	}
	return len(p), nil
}

func TestReaderKeepAliveAndEndings(t *testing.T) {
	in := "POST http://a:1/one HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello" +
		"GET http://b:2/two HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n" +
		"GET http://c:3/three HTTP/1.1\r\n\r\n"
	r := NewReader(strings.NewReader(in), Options{})
	first, err := r.Next()
	if err != nil || first.Target != (Authority{"a", 1}) {
		t.Fatalf("first: %+v, %v", first, err)
	}
	// The second request's body is left unread: Next must skip it.
	second, err := r.Next()
	if err != nil || second.Target != (Authority{"b", 2}) {
		t.Fatalf("second: %+v, %v", second, err)
	}
	third, err := r.Next()
	if err != nil || third.Target != (Authority{"c", 3}) || third.HTTP.RequestURI != "/three" {
		t.Fatalf("third: %+v, %v", third, err)
	}
	if _, err := r.Next(); !errors.Is(err, io.EOF) {
		t.Fatalf("end: %v, want io.EOF", err)
	}

	if _, err := NewReader(strings.NewReader(""), Options{}).Next(); !errors.Is(err, io.EOF) {
		t.Fatalf("empty connection: %v, want io.EOF", err)
	}
	_, err = NewReader(strings.NewReader("GET http://a/ HTTP/1.1\r\nHost: a"), Options{}).Next()
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("cut inside the head: %v, want io.ErrUnexpectedEOF", err)
	}
	var perr *Error
	if errors.As(err, &perr) {
		t.Fatal("a cut connection must not be answered")
	}
	broken := errors.New("connection reset")
	_, err = NewReader(io.MultiReader(strings.NewReader("GET http://a/ HTTP/1.1\r\n"), iotestErr{broken}), Options{}).Next()
	if !errors.Is(err, broken) {
		t.Fatalf("read error: %v, want it wrapped", err)
	}
}

type iotestErr struct{ err error }

func (e iotestErr) Read([]byte) (int, error) { return 0, e.err }

func TestReaderBufferedAfterConnect(t *testing.T) {
	r := NewReader(strings.NewReader("CONNECT db:5432 HTTP/1.1\r\n\r\n\x00\x00\x00\x08tunnel"), Options{})
	req, err := r.Next()
	if err != nil || req.Form != AuthorityForm {
		t.Fatalf("%+v, %v", req, err)
	}
	if got := string(r.Buffered()); got != "\x00\x00\x00\x08tunnel" {
		t.Fatalf("buffered %q", got)
	}
}

var benchRequest = []byte("GET http://web.shop.svc.cluster.local:8080/api/items?limit=10 HTTP/1.1\r\n" +
	"Host: web.shop.svc.cluster.local:8080\r\nUser-Agent: curl/8.5.0\r\nAccept: */*\r\nProxy-Connection: Keep-Alive\r\n\r\n")

// BenchmarkReaderNext is a connection's first request: a new Reader (its 4 KiB buffer) and
// one absolute-form request.
func BenchmarkReaderNext(b *testing.B) {
	src := bytes.NewReader(benchRequest)
	b.ReportAllocs()
	for b.Loop() {
		src.Reset(benchRequest)
		if _, err := NewReader(src, Options{}).Next(); err != nil {
			b.Fatal(err)
		}
	}
}

// repeating serves its bytes over and over: an endless keep-alive connection.
type repeating struct {
	b []byte
	i int
}

func (r *repeating) Read(p []byte) (int, error) {
	n := copy(p, r.b[r.i:])
	r.i = (r.i + n) % len(r.b)
	return n, nil
}

// BenchmarkReaderNextKeepAlive is each later request on a kept-alive connection.
func BenchmarkReaderNextKeepAlive(b *testing.B) {
	r := NewReader(&repeating{b: benchRequest}, Options{})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.Next(); err != nil {
			b.Fatal(err)
		}
	}
}
