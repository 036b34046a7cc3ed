package proxytest

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"

	"github.com/meridian-mesh/meridian/internal/testutil"
	"github.com/meridian-mesh/meridian/proxy/transportheader"
)

// RawResponse is what RawServer answers to every request: a 200 with a 12-byte body.
const RawResponse = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 12\r\n\r\nhello world\n"

var rawResponse = []byte(RawResponse)

// RawServer runs, until b ends, an HTTP/1.1 upstream for benchmarks that answers every
// request head with RawResponse and allocates nothing per request; with cfg, a connection
// is TLS and starts with a transport header (a meshed pod's inbound port). It returns the
// listener's address.
func RawServer(b *testing.B, cfg *tls.Config) *net.TCPAddr {
	lis := testutil.Listen(b)
	testutil.ServeConns(b, lis, "the raw server", func(c net.Conn) {
		if cfg != nil {
			tc := tls.Server(c, cfg)
			if _, err := transportheader.Read(tc); err != nil {
				return
			}
			c = tc
		}
		br := bufio.NewReader(c)
		for {
			for {
				line, err := br.ReadSlice('\n')
				if err != nil {
					return
				}
				if len(line) == 2 {
					break
				}
			}
			if _, err := c.Write(rawResponse); err != nil {
				return
			}
		}
	})
	return lis.Addr().(*net.TCPAddr)
}

// ReadRawResponse reads one response to a request to RawServer: a 200 whose head is
// followed by a 12-byte body.
func ReadRawResponse(br *bufio.Reader) error {
	first := true
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return err
		}
		if first && !bytes.HasPrefix(line, []byte("HTTP/1.1 200 ")) {
			return fmt.Errorf("status line %q", line)
		}
		first = false
		if len(line) == 2 {
			break
		}
	}
	_, err := br.Discard(12)
	return err
}

// BenchRaw measures exchanges of req on c (a connection to a proxy in front of RawServer):
// each writes req and reads the response with ReadRawResponse. One exchange before the
// timer starts brings up what the proxy connects lazily.
func BenchRaw(b *testing.B, c net.Conn, req []byte) {
	br := bufio.NewReader(c)
	exchange := func() {
		if _, err := c.Write(req); err != nil {
			b.Fatal(err)
		}
		if err := ReadRawResponse(br); err != nil {
			b.Fatal(err)
		}
	}
	exchange()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		exchange()
	}
}

// BenchGet measures GETs of url with c, each reading the whole body and expecting a 200. One
// GET before the timer starts brings up the connections and what the proxy resolves lazily.
func BenchGet(b *testing.B, c *http.Client, url string) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		b.Fatal(err)
	}
	get := func() {
		res, err := c.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		_ = res.Body.Close()
		if res.StatusCode != http.StatusOK {
			b.Fatalf("status %d", res.StatusCode)
		}
	}
	get()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		get()
	}
}
