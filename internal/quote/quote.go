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
func Prefix(s string, max int) string { return clip(s, max, `"`) }

// Message is for an error message, not an input, that may carry input: a reason a library
// gave, which quotes what it was sent in full. It shows s without adding quotes (printable
// runes as they are, quotes and backslashes included), control characters and invalid UTF-8
// escaped as String escapes them, and at most Max bytes of it, followed by "... (N bytes)".
func Message(s string) string { return clip(s, Max, "") }

// MessagePrefix is Message with a limit of max bytes, for a message whose own words may be
// longer than Max (a validation error that explains a rule) while what it quotes stays bounded.
func MessagePrefix(s string, max int) string { return clip(s, max, "") }

// clip writes s between the quote marks q (each escaped inside when q is set) up to max bytes.
func clip(s string, max int, q string) string {
	buf := make([]byte, 0, min(len(s), max)+16)
	buf = append(buf, q...)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		var e []byte
		switch {
		case r == utf8.RuneError && size == 1:
			e = appendByteEscape(nil, s[i])
		case q == "" && strconv.IsPrint(r):
			e = []byte(s[i : i+size])
		default:
			e = quotedRune(r)
		}
		if len(buf)-len(q)+len(e) > max {
			buf = append(buf, q...)
			buf = append(buf, "... ("...)
			buf = strconv.AppendInt(buf, int64(len(s)), 10)
			return string(append(buf, " bytes)"...))
		}
		buf = append(buf, e...)
		i += size
	}
	return string(append(buf, q...))
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
