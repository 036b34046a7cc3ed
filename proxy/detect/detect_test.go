package detect

import (
	"strings"
	"testing"
)

func TestDetect(t *testing.T) {
	cases := []struct {
		in   string
		want Protocol
	}{
		{"", NeedMore},
		{"G", NeedMore},
		{"GET", NeedMore},
		{"GET ", NeedMore},
		{"GET /", NeedMore},
		{"GET / ", NeedMore},
		{"GET / HTTP/1.", NeedMore},
		{"GET / HTTP/1.1", NeedMore},
		{"GET / HTTP/1.1\r", NeedMore},
		{"GET / HTTP/1.1\r\n", HTTP1},
		{"GET / HTTP/1.0\n", HTTP1},
		{"GET /foo/bar?x=1 HTTP/1.1\r\nHost: web\r\n\r\n", HTTP1},
		{"POST /foo HTTP/1.1\r\n", HTTP1},
		{"CONNECT web.shop:443 HTTP/1.1\r\n", HTTP1},
		{"GET http://web.shop.svc.cluster.local:8080/path HTTP/1.1\r\n", HTTP1},
		{"OPTIONS * HTTP/1.1\r\n", HTTP1},
		{"M-SEARCH * HTTP/1.1\r\n", HTTP1},
		{"PRI * HTTP/1.1\r\n", HTTP1}, // shares its start with the preface
		// Empty lines before the request line are skipped (RFC 9112, section 2.2).
		{"\r", NeedMore},
		{"\r\n", NeedMore},
		{"\n\r\n", NeedMore},
		{"\r\nGET / HTTP/1.1\r\n", HTTP1},
		{"\n\nGET / HTTP/1.1\r\n", HTTP1},
		{"\rGET / HTTP/1.1\r\n", Opaque},
		{"\r\n\x16\x03", Opaque},
		{"GET /caf\xc3\xa9 HTTP/1.1\r\n", HTTP1},
		{"P", NeedMore},
		{"PRI * HTTP/2.0\r\n", NeedMore},
		{Preface[:len(Preface)-1], NeedMore},
		{Preface, HTTP2},
		{Preface + "\x00\x00\x12\x04\x00", HTTP2},
		{"PRI * HTTP/2.0\r\n\r\nXX\r\n\r\n", Opaque}, // a broken preface is not HTTP/2
		{"PRI * HTTP/2.0\r\n\r\n", NeedMore},
		// Not HTTP.
		{"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", Opaque}, // TLS ClientHello
		{"\x00\x00\x00\x08\x04\xd2\x16\x2f", Opaque},             // Postgres SSLRequest
		{"*1\r\n$4\r\nPING\r\n", Opaque},                         // Redis
		{"GET foo\r\n", Opaque},                                  // Redis/memcached inline
		{"get key\r\n", Opaque},
		{"SSH-2.0-OpenSSH_9.6\r\n", Opaque},
		{" GET / HTTP/1.1\r\n", Opaque},
		{"GET  / HTTP/1.1\r\n", Opaque},
		{"GET / HTTP/2.0\r\n", Opaque},
		{"GET / HTTP/1.x\r\n", Opaque},
		{"GET / HTTP/1.1 \r\n", Opaque},
		{"GET / HTTP/1.1\rX", Opaque},
		{"GET /a\tb HTTP/1.1\r\n", Opaque},
		{"GET /a\x7fb HTTP/1.1\r\n", Opaque},
		{"GET / http/1.1\r\n", Opaque},
		{"GE(T / HTTP/1.1\r\n", Opaque},
		{strings.Repeat("A", 32) + " / HTTP/1.1\r\n", HTTP1},
		{strings.Repeat("A", 33) + " / HTTP/1.1\r\n", Opaque},
		{"GET /" + strings.Repeat("a", 10000), NeedMore}, // Detect has no bound; Peek does
	}
	for _, tc := range cases {
		if got := Detect([]byte(tc.in)); got != tc.want {
			t.Errorf("Detect(%q) = %v, want %v", short(tc.in), got, tc.want)
		}
	}
}

// TestDetectPrefixes feeds whole messages byte by byte: every answer is NeedMore until the
// decisive byte, then the final answer on every longer prefix.
func TestDetectPrefixes(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    Protocol
		decides int // length of the shortest decided prefix
	}{
		{"GET / HTTP/1.1\r\nHost: x\r\n\r\n", HTTP1, len("GET / HTTP/1.1\r\n")},
		{Preface + "garbage", HTTP2, len(Preface)},
		{"PRI * HTTP/1.1\r\n", HTTP1, len("PRI * HTTP/1.1\r\n")},
		{"PR\x00", Opaque, 3},
		{"hello world\n", Opaque, len("hello world\n")},
	} {
		for i := 0; i <= len(tc.in); i++ {
			want := NeedMore
			if i >= tc.decides {
				want = tc.want
			}
			if got := Detect([]byte(tc.in[:i])); got != want {
				t.Fatalf("Detect(%q) = %v, want %v", tc.in[:i], got, want)
			}
		}
	}
}

func short(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

func BenchmarkDetect(b *testing.B) {
	for _, in := range []struct{ name, data string }{
		{"http1", "GET /api/v1/items?limit=10 HTTP/1.1\r\nHost: web.shop.svc.cluster.local:8080\r\n\r\n"},
		{"h2", Preface},
		{"tls", "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03"},
	} {
		b.Run(in.name, func(b *testing.B) {
			data := []byte(in.data)
			b.ReportAllocs()
			for b.Loop() {
				if Detect(data) == NeedMore {
					b.Fatal("undecided")
				}
			}
		})
	}
}
