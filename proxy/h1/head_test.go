package h1

import (
	"bufio"
	"errors"
	"io"
	"strings"
	"testing"
)

// TestReadHeadSkipsEmptyLines: empty lines before the start line (CRLF or a bare LF, as a
// client sends after a POST body) are skipped, within the head's byte limit; a stream that
// ends after them ends like an empty one.
func TestReadHeadSkipsEmptyLines(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		limit    int
		raw      string
		err      error
	}{
		{"CRLF and LF first", "\r\n\nGET / HTTP/1.1\r\nHost: a\r\n\r\n", 1024, "GET / HTTP/1.1\r\nHost: a\r\n\r\n", nil},
		{"only empty lines", "\r\n\r\n", 1024, "", io.EOF},
		{"empty lines past the limit", strings.Repeat("\r\n", 600) + "GET / HTTP/1.1\r\n\r\n", 1024, "", ErrHeadTooLarge},
		{"a blank line ends a head", "GET / HTTP/1.1\r\n\r\n\r\n", 1024, "GET / HTTP/1.1\r\n\r\n", nil},
	} {
		var h Head
		err := ReadHead(bufio.NewReaderSize(strings.NewReader(tc.in), 16), &h, tc.limit)
		if !errors.Is(err, tc.err) || tc.err == nil && string(h.Raw) != tc.raw {
			t.Errorf("%s: %q, %v; want %q, %v", tc.name, h.Raw, err, tc.raw, tc.err)
			continue
		}
		if tc.err == nil {
			if err := h.ParseRequest(); err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
		}
	}
}
