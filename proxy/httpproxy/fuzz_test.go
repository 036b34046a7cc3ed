package httpproxy

import (
	"bytes"
	"errors"
	"net/http"
	"net/netip"
	"strings"
	"testing"
)

// FuzzReader feeds arbitrary bytes to a Reader: it never panics, reads at most the bound
// per head, and every request it accepts has a normalised target that parses back to itself,
// and, for absolute-form, an origin-form request line.
func FuzzReader(f *testing.F) {
	for _, s := range []string{
		"GET http://web.shop.svc.cluster.local:8080/path HTTP/1.1\r\n\r\n",
		"CONNECT db:5432 HTTP/1.1\r\n\r\nxx",
		"GET / HTTP/1.1\r\nHost: [::1]:80\r\n\r\n",
		"GET / HTTP/1.0\r\n\r\n",
		"POST http://a/ HTTP/1.1\r\nContent-Length: 2\r\n\r\nokGET http://b/ HTTP/1.1\r\n\r\n",
		"GET http://a:99999/ HTTP/1.1\r\n\r\n",
		"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
	} {
		f.Add([]byte(s), false)
	}
	f.Add([]byte("GET / HTTP/1.1\r\n\r\n"), true)
	f.Fuzz(func(t *testing.T, data []byte, withOrigDst bool) {
		opts := Options{MaxHeaderBytes: 1024}
		if withOrigDst {
			opts.OrigDst = netip.MustParseAddrPort("10.0.0.1:8080")
		}
		c := &countingReader{r: bytes.NewReader(data)}
		r := NewReader(c, opts)
		for range 3 {
			before := c.n
			req, err := r.Next()
			var perr *Error
			switch {
			case errors.As(err, &perr):
				if perr.Status != http.StatusBadRequest && perr.Status != http.StatusRequestHeaderFieldsTooLarge {
					t.Fatalf("status %d", perr.Status)
				}
				if len(perr.Reason) > 200 {
					t.Fatalf("reason quotes too much: %q", perr.Reason)
				}
				return
			case err != nil:
				return
			}
			if c.n-before > opts.MaxHeaderBytes+2*bufSize && req.HTTP.ContentLength <= 0 {
				t.Fatalf("read %d bytes for one head", c.n-before)
			}
			if req.Target.Host == "" || req.Target.Port == 0 {
				t.Fatalf("empty target %+v", req.Target)
			}
			if back, err := ParseAuthority(req.Target.String(), 0); err != nil || back != req.Target {
				t.Fatalf("target %+v does not parse back: %+v, %v", req.Target, back, err)
			}
			if req.Form == AbsoluteForm && !strings.HasPrefix(req.HTTP.RequestURI, "/") {
				t.Fatalf("absolute-form rewritten to %q", req.HTTP.RequestURI)
			}
		}
	})
}

// FuzzParseAuthority: never panics; what it accepts is normalised and parses back to itself.
func FuzzParseAuthority(f *testing.F) {
	for _, s := range []string{"web.shop.svc.cluster.local:8080", "[::1]:80", "Web.", "10.0.0.1", "[::ffff:1.2.3.4]", "a:", ":1"} {
		f.Add(s, uint16(80))
	}
	f.Fuzz(func(t *testing.T, s string, def uint16) {
		a, err := ParseAuthority(s, def)
		if err != nil {
			if len(err.Error()) > 250 {
				t.Fatalf("error quotes too much: %q", err)
			}
			return
		}
		if a.Host == "" || a.Port == 0 || a.Host != strings.ToLower(a.Host) || strings.HasSuffix(a.Host, ".") {
			t.Fatalf("ParseAuthority(%q) = %+v: not normalised", s, a)
		}
		if back, err := ParseAuthority(a.String(), 0); err != nil || back != a {
			t.Fatalf("ParseAuthority(%q) = %+v, but %q parses to %+v, %v", s, a, a.String(), back, err)
		}
	})
}
