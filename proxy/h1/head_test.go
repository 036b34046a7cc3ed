package h1

import (
	"bufio"
	"strings"
	"testing"
)

// TestDiscardEmptyLines: the CR and LF bytes buffered before a request line are dropped
// without reading more; a buffer of nothing else reports that the connection is still idle.
func TestDiscardEmptyLines(t *testing.T) {
	for _, tc := range []struct {
		in, rest  string
		onlyEmpty bool
	}{
		{"\r\n\nGET / HTTP/1.1\r\n\r\n", "GET / HTTP/1.1\r\n\r\n", false},
		{"\r\n", "", true},
		{"GET / HTTP/1.1\r\n\r\n", "GET / HTTP/1.1\r\n\r\n", false},
	} {
		br := bufio.NewReader(strings.NewReader(tc.in))
		if _, err := br.Peek(1); err != nil {
			t.Fatal(err)
		}
		if got := DiscardEmptyLines(br); got != tc.onlyEmpty {
			t.Errorf("%q: onlyEmpty %v, want %v", tc.in, got, tc.onlyEmpty)
		}
		rest, _ := br.Peek(br.Buffered())
		if string(rest) != tc.rest {
			t.Errorf("%q: left %q, want %q", tc.in, rest, tc.rest)
		}
	}
	if !DiscardEmptyLines(bufio.NewReader(strings.NewReader(""))) {
		t.Error("an empty buffer is not idle")
	}
}
