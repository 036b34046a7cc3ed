package yamltext

import (
	"bytes"
	"encoding/binary"
	"strings"
	"unicode/utf16"
)

// breaks are the line breaks go-yaml's scanner counts (YAML 1.1): besides LF and CR (CRLF is
// one), NEL (U+0085), LS (U+2028) and PS (U+2029).
const breaks = "\n\r\u0085\u2028\u2029"

// Breaks counts the line breaks of s as the YAML decoder counts them (CRLF as one).
func Breaks(s string) int {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	n := 0
	for _, r := range s {
		if strings.ContainsRune(breaks, r) {
			n++
		}
	}
	return n
}

// TrimBreaks is s without the line breaks it ends with.
func TrimBreaks(s string) string { return strings.TrimRight(s, breaks) }

// UTF16 decodes b when it starts with a UTF-16 byte order mark, big or little endian (an odd
// last byte is dropped, as the YAML decoder drops it); false, and b unread, otherwise.
func UTF16(b []byte) (string, bool) {
	var order binary.ByteOrder
	switch {
	case bytes.HasPrefix(b, []byte{0xfe, 0xff}):
		order = binary.BigEndian
	case bytes.HasPrefix(b, []byte{0xff, 0xfe}):
		order = binary.LittleEndian
	default:
		return "", false
	}
	units := make([]uint16, 0, len(b)/2)
	for i := 2; i+1 < len(b); i += 2 {
		units = append(units, order.Uint16(b[i:]))
	}
	return string(utf16.Decode(units)), true
}
