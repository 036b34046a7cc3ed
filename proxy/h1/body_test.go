package h1

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/http/httputil"
	"strings"
	"testing"
)

// TestChunkSizeLineAsNetHTTP: a chunk-size line is accepted exactly where net/http's chunked
// reader accepts it, for the spaces and tabs around the size. FuzzChunked found the lean
// relay accepting a space between the size and ";" ("0 ;\r\n\r\n"), which net/http refuses.
func TestChunkSizeLineAsNetHTTP(t *testing.T) {
	for _, tc := range []struct {
		line string
		ok   bool
	}{
		{"0", true},
		{"0 ", true},
		{"0\t \t", true},
		{"0;a=b", true},
		{"0;a=b ", true},
		{"0; a = b", true},
		{"0 ;", false},
		{"0 ;a=b", false},
		{"0\t;a=b", false},
		{"5 ;a", false},
		{"0 x", false},
		{" 0", false},
	} {
		body := tc.line + "\r\n\r\n"
		if tc.line[0] == '5' {
			body = tc.line + "\r\nhello\r\n0\r\n\r\n"
		}
		var out bytes.Buffer
		dst := bufio.NewWriter(&out)
		err := RelayChunked(dst, bufio.NewReader(strings.NewReader(body)))
		_, refErr := io.ReadAll(httputil.NewChunkedReader(strings.NewReader(body)))
		if (refErr == nil) != tc.ok {
			t.Fatalf("%q: net/http's reader says %v, the table %v", tc.line, refErr, tc.ok)
		}
		switch {
		case tc.ok && err != nil:
			t.Errorf("%q: refused: %v", tc.line, err)
		case !tc.ok && err == nil:
			t.Errorf("%q: accepted, net/http refuses it: %v", tc.line, refErr)
		case !tc.ok && !errors.Is(err, ErrBadChunk):
			t.Errorf("%q: error %v, want ErrBadChunk", tc.line, err)
		}
	}
}
