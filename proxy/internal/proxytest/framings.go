package proxytest

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// ResponseFramings is the script of a Scripted application for CheckResponseFramings: a
// chunked body with an extension and trailers, interim responses first, a 204, a HEAD's
// Content-Length, hop-by-hop fields in an HTTP/1.0 response, and a body delimited by the
// connection's close.
func ResponseFramings(n int64, _ string) (string, bool) {
	switch n {
	case 1: // chunked with an extension and trailers
		return "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sum\r\n\r\n5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-Sum: 42\r\n\r\n", false
	case 2: // interim responses first
		return "HTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", false
	case 3:
		return "HTTP/1.1 204 No Content\r\nX-A: 1\r\n\r\n", false
	case 4: // a HEAD's Content-Length describes the GET it stands for
		return "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n", false
	case 5: // hop-by-hop fields are dropped, the version is the proxy's
		return "HTTP/1.0 200 OK\r\nConnection: keep-alive, X-Hop\r\nKeep-Alive: timeout=5\r\nX-Hop: 1\r\nX-End: 2\r\nContent-Length: 3\r\n\r\nabc", false
	}
	// the body ends with the connection
	return "HTTP/1.1 200 OK\r\nX-Close: 1\r\n\r\nuntil the end", true
}

// CheckResponseFramings checks that the responses of ResponseFramings reach the client as
// the application sent them, through a proxy that dial connects to: get (a GET request's
// bytes) three times pipelined on one connection, then head (a HEAD's), get and get on
// connections of their own.
func CheckResponseFramings(t *testing.T, dial func() net.Conn, get, head string) {
	t.Helper()
	res := Exchange(t, dial(), get+get+get, 3, http.MethodGet)
	if b := Body(res[0]); b != "hello world" || res[0].Trailer.Get("X-Sum") != "42" {
		t.Errorf("chunked: %q, trailers %v", b, res[0].Trailer)
	}
	if res[1].StatusCode != 200 || Body(res[1]) != "ok" {
		t.Errorf("after 103: %d", res[1].StatusCode)
	}
	if res[2].StatusCode != 204 || res[2].Header.Get("X-A") != "1" {
		t.Errorf("204: %v", res[2])
	}
	res = Exchange(t, dial(), head, 1, http.MethodHead)
	if res[0].ContentLength != 100 {
		t.Errorf("HEAD: Content-Length %d", res[0].ContentLength)
	}
	res = Exchange(t, dial(), get, 1, http.MethodGet)
	if h := res[0].Header; res[0].Proto != "HTTP/1.1" || h.Get("X-Hop") != "" || h.Get("Keep-Alive") != "" || h.Get("X-End") != "2" || Body(res[0]) != "abc" {
		t.Errorf("hop-by-hop: %s %v", res[0].Proto, h)
	}
	res = Exchange(t, dial(), get, 1, http.MethodGet)
	if Body(res[0]) != "until the end" || !res[0].Close {
		t.Errorf("close-delimited: %q, close %v", Body(res[0]), res[0].Close)
	}
}

// ResponseFailures is the script of a Scripted application whose responses a proxy cannot
// relay exactly: an unknown transfer coding and bytes that are not HTTP (a proxy answers
// 502), then bodies cut short after their heads, by Content-Length, by a malformed chunk and
// by chunk extensions past net/http's overhead budget (a proxy cuts the client's
// connection). Each closes its connection.
func ResponseFailures(n int64, _ string) (string, bool) {
	switch n {
	case 1:
		return "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", true
	case 2:
		return "NOT HTTP\r\n\r\n", true
	case 3:
		return "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort", true // cut short
	case 4:
		return "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", true
	}
	heavy := "1;e=" + strings.Repeat("x", 4000) + "\r\nX\r\n" // 3988 bytes of excess each
	return "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + strings.Repeat(heavy, 5) + "0\r\n\r\n", true
}

// CompleteResponse writes req on c and reports whether a whole response, its head and body,
// came back (within Wait). It closes c.
func CompleteResponse(c net.Conn, req string) bool {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(Wait))
	_, _ = io.WriteString(c, req)
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err == nil {
		_, err = io.ReadAll(res.Body)
	}
	return err == nil
}

// ChunkedCut writes req on c and reports whether c was closed (within Wait) before the last
// chunk of a chunked body ("0\r\n\r\n") came: the bytes are read raw, so that a body the
// client's own reader would refuse (too much chunk overhead) shows whether the proxy cut it
// or relayed it whole. It closes c.
func ChunkedCut(c net.Conn, req string) bool {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(Wait))
	_, _ = io.WriteString(c, req)
	b, err := io.ReadAll(c)
	return err == nil && !bytes.Contains(b, []byte("\r\n0\r\n\r\n"))
}
