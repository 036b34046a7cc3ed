package quote

import (
	"strconv"
	"unicode/utf8"
)

// Max is the most bytes String and Bytes write between the quotes.
const Max = 256

// String returns s quoted (see the package comment). When the quoted form of s would exceed
// Max bytes between the quotes, only the longest prefix that fits is shown, followed by
// "... (N bytes)" with N the length of s.
func String(s string) string { return Prefix(s, Max) }

// Bytes is String for a byte slice.
func Bytes(b []byte) string { return Prefix(string(b), Max) }

// Prefix is String with a limit of max bytes between the quotes (at least one rune's quoted
// form is always shown when s is not empty and max allows it).
func Prefix(s string, max int) string {
	buf := make([]byte, 0, min(len(s), max)+16)
	buf = append(buf, '"')
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		var q []byte
		if r == utf8.RuneError && size == 1 {
			q = appendByteEscape(nil, s[i])
		} else {
			q = quotedRune(r)
		}
		if len(buf)-1+len(q) > max {
			buf = append(buf, '"')
			buf = append(buf, "... ("...)
			buf = strconv.AppendInt(buf, int64(len(s)), 10)
			return string(append(buf, " bytes)"...))
		}
		buf = append(buf, q...)
		i += size
	}
	return string(append(buf, '"'))
}

// quotedRune is r as strconv.Quote writes it inside the quotes.
func quotedRune(r rune) []byte {
	q := strconv.AppendQuoteRune(nil, r) // 'r'
	q = q[1 : len(q)-1]
	switch string(q) {
	case `\'`:
		return []byte{'\''}
	case `"`:
		return []byte(`\"`)
	}
	return q
}

func appendByteEscape(b []byte, c byte) []byte {
	const hex = "0123456789abcdef"
	return append(b, '\\', 'x', hex[c>>4], hex[c&0xf])
}
