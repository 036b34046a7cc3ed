package h1

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
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
		relayAsNetHTTP(t, fmt.Sprintf("%q", tc.line), body, 0, tc.ok, ErrBadChunk)
	}
}

// relayAsNetHTTP relays body with RelayChunked (reading it through a bufio.Reader of size,
// 0 for the default) and checks that it is accepted exactly when net/http's chunked reader
// accepts it, and the table agrees (ok); a body refused must fail with want, which is an
// ErrBadChunk. It returns what was relayed.
func relayAsNetHTTP(t *testing.T, name, body string, size int, ok bool, want error) []byte {
	t.Helper()
	var out bytes.Buffer
	dst := bufio.NewWriter(&out)
	src := bufio.NewReader(strings.NewReader(body))
	if size > 0 {
		src = bufio.NewReaderSize(strings.NewReader(body), size)
	}
	err := RelayChunked(dst, src)
	_ = dst.Flush()
	_, refErr := io.ReadAll(httputil.NewChunkedReader(strings.NewReader(body)))
	if (refErr == nil) != ok {
		t.Fatalf("%s: net/http's reader says %v, the table %v", name, refErr, ok)
	}
	switch {
	case ok && err != nil:
		t.Errorf("%s: refused: %v", name, err)
	case !ok && err == nil:
		t.Errorf("%s: accepted, net/http refuses it: %v", name, refErr)
	case !ok && (!errors.Is(err, want) || !errors.Is(err, ErrBadChunk)):
		t.Errorf("%s: error %v, want %v (an ErrBadChunk)", name, err, want)
	}
	return out.Bytes()
}

// TestChunkOverheadAsNetHTTP: a chunked body whose chunk-size lines (long extensions on
// small chunks) outweigh its data is refused exactly where net/http's chunked reader refuses
// it ("too much non-data"): 16 bytes per chunk plus twice its data are free, the excess may
// reach 16 KiB and not pass it, and a large chunk's credit does not carry over (the excess
// stays at zero or above). As in net/http, the last chunk's line is not checked (its end of
// body takes precedence there).
func TestChunkOverheadAsNetHTTP(t *testing.T) {
	// heavy is a chunk of one byte whose size line is n bytes with its CRLF: n-18 of excess.
	heavy := func(n int) string { return "1;e=" + strings.Repeat("x", n-6) + "\r\nX\r\n" }
	heavies := func(k int) string { return strings.Repeat(heavy(4018), k) } // 4000 each
	big := "1000\r\n" + strings.Repeat("d", 0x1000) + "\r\n"
	for _, tc := range []struct {
		name, body string
		ok         bool
	}{
		{"one byte per chunk", strings.Repeat("1\r\nX\r\n", 20000) + "0\r\n\r\n", true},
		{"excess of 16384", heavies(4) + heavy(402) + "0\r\n\r\n", true},
		{"excess of 16385", heavies(4) + heavy(403) + "0\r\n\r\n", false},
		{"last chunk's line not checked", heavies(4) + heavy(402) + "0;e=" + strings.Repeat("x", 4000) + "\r\n\r\n", true},
		{"no credit carried", big + heavies(4) + heavy(403) + "0\r\n\r\n", false},
		{"data between", heavies(4) + "c8\r\n" + strings.Repeat("d", 200) + "\r\n" + heavy(814) + "0\r\n\r\n", true},
		{"data between, over", heavies(4) + "c8\r\n" + strings.Repeat("d", 200) + "\r\n" + heavy(815) + "0\r\n\r\n", false},
		{"trailers do not count", heavies(4) + heavy(402) + "0\r\n" + strings.Repeat("X-T: "+strings.Repeat("v", 1000)+"\r\n", 20) + "\r\n", true},
	} {
		out := relayAsNetHTTP(t, tc.name, tc.body, 4<<10, tc.ok, ErrChunkOverhead)
		if !tc.ok && bytes.Contains(out, []byte("\r\n0")) {
			t.Errorf("%s: relayed past the line over budget", tc.name)
		}
	}
}
