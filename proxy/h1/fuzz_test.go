package h1

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"net/http/httputil"
	"strings"
	"testing"
)

// The parsers are checked against net/http's: whatever they accept, net/http accepts and
// reads the same way, so that the lean path never frames a message differently from the
// server and client it stands in for.

func FuzzRequestHead(f *testing.F) {
	for _, s := range []string{
		"GET http://web.shop.svc.cluster.local:8080/x?y HTTP/1.1\r\nHost: a\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: web:80\r\nContent-Length: 5\r\nConnection: close, X-A\r\nX-A: 1\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n",
		"GET / HTTP/1.0\r\n\r\n",
		"OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\r\nX: \xff\r\n\r\n",
		"GET http://[::1]:8080/x HTTP/1.1\r\nHost: a\r\n\r\n",
		"GET http://[fe80::1%25eth0]/ HTTP/1.1\r\nHost: a\r\n\r\n",
		"GET http://user@web/ HTTP/1.1\r\nHost: a\r\n\r\n",
		"GET http://:A HTTP/1.1\r\nHost: a\r\n\r\n",
		"GET http://web?q#frag HTTP/1.1\r\nHost: a\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		h := &Head{}
		if ReadHead(bufio.NewReaderSize(bytes.NewReader(raw), 64), h, 64<<10) != nil || h.ParseRequest() != nil || !h.Simple(16<<10) {
			return
		}
		authority, path, absolute, ok := h.SplitTarget()
		if !ok {
			return
		}
		req, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(h.Raw)))
		if err != nil {
			t.Fatalf("lean accepts %q, net/http refuses it: %v", h.Raw, err)
		}
		wantLen := max(h.ContentLength, 0)
		if req.Method != string(h.Method) || req.RequestURI != string(h.Target) || req.ContentLength != wantLen || req.Close != h.Close {
			t.Fatalf("%q: lean %s %s length %d close %v; net/http %s %s length %d close %v", h.Raw,
				h.Method, h.Target, wantLen, h.Close, req.Method, req.RequestURI, req.ContentLength, req.Close)
		}
		if req.URL.Host == "" && req.Host != string(h.Host) {
			t.Fatalf("%q: Host %q, net/http %q", h.Raw, h.Host, req.Host)
		}
		if absolute && (req.URL.Host != string(authority) || req.URL.Scheme != "http") {
			t.Fatalf("%q: lean authority %q, net/http %s://%s", h.Raw, authority, req.URL.Scheme, req.URL.Host)
		}
		if !absolute && (string(authority) != string(h.Host) || string(path) != string(h.Target)) {
			t.Fatalf("%q: origin-form split into %q %q", h.Raw, authority, path)
		}
	})
}

func FuzzResponseHead(f *testing.F) {
	for _, s := range []string{
		"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n",
		"HTTP/1.0 204\r\nConnection: keep-alive\r\n\r\n",
		"HTTP/1.1 404 Not Found\r\nConnection: close\r\n\r\n",
		"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n",
	} {
		f.Add([]byte(s), false)
	}
	f.Fuzz(func(t *testing.T, raw []byte, head bool) {
		var h Head
		if ReadHead(bufio.NewReaderSize(bytes.NewReader(raw), 64), &h, 64<<10) != nil || h.ParseResponse() != nil {
			return
		}
		req := Head{Method: []byte(http.MethodGet)}
		method := http.MethodGet
		if head {
			req.Method, method = []byte(http.MethodHead), http.MethodHead
		}
		kind, kerr := ResponseBody(&req, &h)
		if kerr != nil {
			return // a 502
		}
		res, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(h.Raw)), &http.Request{Method: method})
		if err != nil {
			t.Fatalf("lean accepts %q, net/http refuses it: %v", h.Raw, err)
		}
		if res.StatusCode != h.Status {
			t.Fatalf("%q: status %d, net/http %d", h.Raw, h.Status, res.StatusCode)
		}
		chunked := len(res.TransferEncoding) == 1 && res.TransferEncoding[0] == "chunked"
		switch kind {
		case ChunkedBody:
			if !chunked {
				t.Fatalf("%q: lean reads chunked, net/http %v", h.Raw, res.TransferEncoding)
			}
		case LengthBody:
			if res.ContentLength != h.ContentLength || chunked {
				t.Fatalf("%q: lean reads %d bytes, net/http %d (%v)", h.Raw, h.ContentLength, res.ContentLength, res.TransferEncoding)
			}
		case NoBody:
			if b, _ := io.ReadAll(res.Body); len(b) != 0 {
				t.Fatalf("%q: lean reads no body, net/http %d bytes", h.Raw, len(b))
			}
		case EOFBody:
			if res.ContentLength != -1 || chunked {
				t.Fatalf("%q: lean reads to the end, net/http %d (%v)", h.Raw, res.ContentLength, res.TransferEncoding)
			}
		}
	})
}

func FuzzChunked(f *testing.F) {
	for _, s := range []string{
		"5\r\nhello\r\n0\r\n\r\n",
		"5;a=b\r\nhello\r\n6\r\n world\r\n0\r\nX-T: 1\r\n\r\n",
		"A\r\n0123456789\r\n0\r\n\r\nnext",
		"5\r\nhel",
		"fffffffffffffff\r\n",
		"5 \r\nhello\r\n0\t\r\n\r\n",
		"5 ;a=b\r\nhello\r\n0\r\n\r\n",
		// Extensions past net/http's overhead budget (ErrChunkOverhead), and just within it.
		strings.Repeat("1;e="+strings.Repeat("x", 4012)+"\r\nX\r\n", 4) + "1;" + strings.Repeat("x", 399) + "\r\nX\r\n0\r\n\r\n",
		strings.Repeat("1;e="+strings.Repeat("x", 4012)+"\r\nX\r\n", 4) + "1;" + strings.Repeat("x", 398) + "\r\nX\r\n0\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		// A 16-byte reader refills mid-line; the proxy's 4 KiB one takes lines up to
		// maxChunkLine, so that the overhead budget can be reached.
		for _, size := range []int{16, 4 << 10} {
			src := bufio.NewReaderSize(bytes.NewReader(in), size)
			var out bytes.Buffer
			dst := bufio.NewWriter(&out)
			err := RelayChunked(dst, src)
			_ = dst.Flush()
			if err != nil {
				continue
			}
			if !bytes.HasPrefix(in, out.Bytes()) {
				t.Fatalf("relayed %q, not a prefix of %q", prefix(out.Bytes()), prefix(in))
			}
			if _, err := io.ReadAll(httputil.NewChunkedReader(bytes.NewReader(out.Bytes()))); err != nil {
				t.Fatalf("lean relays %q as a chunked body, net/http's reader refuses it: %v", prefix(out.Bytes()), err)
			}
		}
	})
}

// prefix is at most 256 bytes of b, for a failure's message.
func prefix(b []byte) []byte { return b[:min(len(b), 256)] }
