package detect

import (
	"bytes"
	"net/http"
	"testing"
)

// FuzzDetect checks that Detect never panics, that its answers are monotone (a decided
// prefix keeps its answer on every extension, and HTTP1/HTTP2 are never contradicted), and
// that what it calls HTTP/1 has a request line net/http accepts the version of.
func FuzzDetect(f *testing.F) {
	for _, s := range []string{
		"GET / HTTP/1.1\r\n", "POST /x HTTP/1.0\nHost: a\n\n", Preface, Preface + "x",
		"PRI * HTTP/1.1\r\n", "PRI * HTTP/2.0\r\n\r\nXX", "\x16\x03\x01\x02\x00",
		"*1\r\n$4\r\nPING\r\n", "GET foo\r\n", "CONNECT a:1 HTTP/1.1\r\n", "", "\r\n\nGET / HTTP/1.1\r\n", "\r\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		full := Detect(data)
		if full == HTTP1 {
			line, _, _ := bytes.Cut(bytes.TrimLeft(data, "\r\n"), []byte("\n")) // after the empty lines
			parts := bytes.Split(bytes.TrimSuffix(line, []byte("\r")), []byte(" "))
			if len(parts) != 3 {
				t.Fatalf("HTTP1 for %q: request line has %d parts", data, len(parts))
			}
			if major, _, ok := http.ParseHTTPVersion(string(parts[2])); !ok || major != 1 {
				t.Fatalf("HTTP1 for %q: version %q", data, parts[2])
			}
		}
		for i := range len(data) {
			p := Detect(data[:i])
			if p != NeedMore && p != full {
				t.Fatalf("Detect(%q) = %v but Detect(%q) = %v", data[:i], p, data, full)
			}
		}
	})
}
