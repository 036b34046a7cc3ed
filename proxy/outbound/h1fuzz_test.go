package outbound

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"net/http/httputil"
	"testing"
)

// The lean path's parsers are checked against net/http's: whatever they accept, net/http
// accepts and reads the same way, so that the lean path never frames a message differently
// from the server and client it stands in for.

func FuzzLeanRequestHead(f *testing.F) {
	for _, s := range []string{
		"GET http://web.shop.svc.cluster.local:8080/x?y HTTP/1.1\r\nHost: a\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: web:80\r\nContent-Length: 5\r\nConnection: close, X-A\r\nX-A: 1\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n",
		"GET / HTTP/1.0\r\n\r\n",
		"OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\r\nX: \xff\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	o := testOutbound(f)
	f.Fuzz(func(t *testing.T, raw []byte) {
		s := &h1session{o: o, cc: &clientConn{}}
		h := &s.req
		if readHead(bufio.NewReaderSize(bytes.NewReader(raw), 64), h, 64<<10) != nil || h.parseRequest() != nil || !h.lean() || s.route() != nil {
			return
		}
		req, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(h.raw)))
		if err != nil {
			t.Fatalf("lean accepts %q, net/http refuses it: %v", h.raw, err)
		}
		wantLen := max(h.contentLength, 0)
		if req.Method != string(h.method) || req.RequestURI != string(h.target) || req.ContentLength != wantLen || req.Close != h.close {
			t.Fatalf("%q: lean %s %s length %d close %v; net/http %s %s length %d close %v", h.raw,
				h.method, h.target, wantLen, h.close, req.Method, req.RequestURI, req.ContentLength, req.Close)
		}
		if req.URL.Host == "" && req.Host != string(h.host) {
			t.Fatalf("%q: Host %q, net/http %q", h.raw, h.host, req.Host)
		}
	})
}

func FuzzLeanResponseHead(f *testing.F) {
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
		var h h1head
		if readHead(bufio.NewReaderSize(bytes.NewReader(raw), 64), &h, 64<<10) != nil || h.parseResponse() != nil {
			return
		}
		req := h1head{method: []byte(http.MethodGet)}
		method := http.MethodGet
		if head {
			req.method, method = []byte(http.MethodHead), http.MethodHead
		}
		kind, kerr := responseBody(&req, &h)
		if kerr != nil {
			return // a 502
		}
		res, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(h.raw)), &http.Request{Method: method})
		if err != nil {
			t.Fatalf("lean accepts %q, net/http refuses it: %v", h.raw, err)
		}
		if res.StatusCode != h.status {
			t.Fatalf("%q: status %d, net/http %d", h.raw, h.status, res.StatusCode)
		}
		chunked := len(res.TransferEncoding) == 1 && res.TransferEncoding[0] == "chunked"
		switch kind {
		case chunkedBody:
			if !chunked {
				t.Fatalf("%q: lean reads chunked, net/http %v", h.raw, res.TransferEncoding)
			}
		case lengthBody:
			if res.ContentLength != h.contentLength || chunked {
				t.Fatalf("%q: lean reads %d bytes, net/http %d (%v)", h.raw, h.contentLength, res.ContentLength, res.TransferEncoding)
			}
		case noBody:
			if b, _ := io.ReadAll(res.Body); len(b) != 0 {
				t.Fatalf("%q: lean reads no body, net/http %d bytes", h.raw, len(b))
			}
		case eofBody:
			if res.ContentLength != -1 || chunked {
				t.Fatalf("%q: lean reads to the end, net/http %d (%v)", h.raw, res.ContentLength, res.TransferEncoding)
			}
		}
	})
}

func FuzzLeanChunked(f *testing.F) {
	for _, s := range []string{
		"5\r\nhello\r\n0\r\n\r\n",
		"5;a=b\r\nhello\r\n6\r\n world\r\n0\r\nX-T: 1\r\n\r\n",
		"A\r\n0123456789\r\n0\r\n\r\nnext",
		"5\r\nhel",
		"fffffffffffffff\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		src := bufio.NewReaderSize(bytes.NewReader(in), 16)
		var out bytes.Buffer
		dst := bufio.NewWriter(&out)
		err := relayChunked(dst, src)
		_ = dst.Flush()
		if err != nil {
			return
		}
		if !bytes.HasPrefix(in, out.Bytes()) {
			t.Fatalf("relayed %q, not a prefix of %q", out.Bytes(), in)
		}
		if _, err := io.ReadAll(httputil.NewChunkedReader(bytes.NewReader(out.Bytes()))); err != nil {
			t.Fatalf("lean relays %q as a chunked body, net/http's reader refuses it: %v", out.Bytes(), err)
		}
	})
}
