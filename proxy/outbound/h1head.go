package outbound

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
)

// The lean HTTP/1.1 path (h1conn.go) reads message heads itself, in place and without
// allocating: an h1head holds the raw bytes of one head and slices of them. It accepts only
// what it understands exactly: a request it is unsure of is handed, unread, to net/http's
// server (errNotLean), which answers or refuses it; a response it cannot parse is a 502.

var (
	errNotLean       = errors.New("request is not for the lean HTTP/1.1 path")
	errHeadTooLarge  = errors.New("message head too large")
	errBadResponse   = errors.New("malformed response from upstream")
	errTooManyFields = errors.New("too many header fields")
)

// maxFields bounds the header fields of one head (net/http has no such bound; a request with
// more goes to net/http).
const maxFields = 128

// h1field is one header line.
type h1field struct {
	name, value []byte
	line        []byte // the raw line with its CRLF, written as it is when forwarded
	hop         bool   // hop-by-hop: not forwarded
}

// h1head is one HTTP/1.x message head. It is reused for every message of a connection;
// nothing in it stays valid after the next read.
type h1head struct {
	raw    []byte // every byte of the head, the final CRLF included
	fields []h1field
	tokens [][]byte // the Connection header's tokens other than close, keep-alive, upgrade

	method, target []byte // request line
	minor          int    // HTTP/1.minor
	status         int    // status line
	reason         []byte // the status line after the code, with its leading space

	host          []byte
	hosts         int
	contentLength int64 // -1 when absent
	te            []byte
	hasTE         bool // a Transfer-Encoding field (te may be empty)
	close         bool // Connection: close (or HTTP/1.0 without keep-alive)
	keepAlive     bool // Connection: keep-alive
	upgrade       bool // Connection: upgrade, or an Upgrade header
	expect        bool
	grpc          bool // Content-Type: application/grpc...
}

// readHead reads one head (up to and including the blank line) into h.raw, at most limit
// bytes. It returns io.EOF when the stream ends before the first byte.
func readHead(br *bufio.Reader, h *h1head, limit int) error {
	h.raw = h.raw[:0]
	start := 0 // where the current line starts in raw
	for {
		line, err := br.ReadSlice('\n')
		h.raw = append(h.raw, line...)
		if len(h.raw) > limit {
			return errHeadTooLarge
		}
		switch {
		case errors.Is(err, bufio.ErrBufferFull): // a line longer than the buffer: read on
			continue
		case err != nil && len(h.raw) > 0:
			return fmt.Errorf("head cut short: %w", err)
		case err != nil:
			return err
		}
		if l := h.raw[start:]; len(l) == 2 && l[0] == '\r' || len(l) == 1 {
			if start == 0 {
				return errNotLean // an empty line before the start line
			}
			return nil
		}
		start = len(h.raw)
	}
}

// lines calls f for every line of raw (without its line ending) up to the blank line, and
// fails on a line that does not end with CRLF or holds a CR elsewhere.
func (h *h1head) lines(f func(i int, line, rawLine []byte) error) error {
	rest := h.raw
	for i := 0; ; i++ {
		n := bytes.IndexByte(rest, '\n')
		if n < 1 || rest[n-1] != '\r' {
			return errNotLean
		}
		line := rest[:n-1]
		if len(line) == 0 {
			return nil
		}
		if bytes.IndexByte(line, '\r') >= 0 {
			return errNotLean
		}
		if err := f(i, line, rest[:n+1]); err != nil {
			return err
		}
		rest = rest[n+1:]
	}
}

func (h *h1head) reset() {
	h.fields, h.tokens = h.fields[:0], h.tokens[:0]
	h.method, h.target, h.reason, h.host, h.te = nil, nil, nil, nil, nil
	h.minor, h.status, h.hosts, h.hasTE = 0, 0, 0, false
	h.contentLength = -1
	h.close, h.keepAlive, h.upgrade, h.expect, h.grpc = false, false, false, false, false
}

// parseRequest parses a request head read by readHead. errNotLean means the lean path does
// not take it (net/http's server decides what it is).
func (h *h1head) parseRequest() error {
	h.reset()
	err := h.lines(func(i int, line, raw []byte) error {
		if i == 0 {
			return h.requestLine(line)
		}
		return h.field(line, raw)
	})
	if err != nil {
		return errNotLean
	}
	h.finish()
	return nil
}

// parseResponse parses a response head read by readHead.
func (h *h1head) parseResponse() error {
	h.reset()
	err := h.lines(func(i int, line, raw []byte) error {
		if i == 0 {
			return h.statusLine(line)
		}
		return h.field(line, raw)
	})
	if err != nil || h.hasTE && !fold(h.te, "chunked") {
		return errBadResponse
	}
	h.finish()
	return nil
}

// requestLine parses METHOD SP request-target SP HTTP/1.x, strictly.
func (h *h1head) requestLine(line []byte) error {
	sp1 := bytes.IndexByte(line, ' ')
	if sp1 < 1 || !isToken(line[:sp1]) {
		return errNotLean
	}
	rest := line[sp1+1:]
	sp2 := bytes.IndexByte(rest, ' ')
	if sp2 < 1 {
		return errNotLean
	}
	h.method, h.target = line[:sp1], rest[:sp2]
	if !validTarget(h.target) {
		return errNotLean
	}
	minor, ok := version(rest[sp2+1:])
	if !ok {
		return errNotLean
	}
	h.minor = minor
	return nil
}

// statusLine parses HTTP/1.x SP 3DIGIT [SP reason].
func (h *h1head) statusLine(line []byte) error {
	if len(line) < 12 || line[8] != ' ' {
		return errBadResponse
	}
	minor, ok := version(line[:8])
	if !ok {
		return errBadResponse
	}
	code := line[9:12]
	for _, c := range code {
		if c < '0' || c > '9' {
			return errBadResponse
		}
	}
	if len(line) > 12 && line[12] != ' ' {
		return errBadResponse
	}
	for _, c := range line[12:] {
		if c < ' ' && c != '\t' || c == 0x7f {
			return errBadResponse
		}
	}
	h.minor, h.status, h.reason = minor, int(code[0]-'0')*100+int(code[1]-'0')*10+int(code[2]-'0'), line[12:]
	if h.status < 100 {
		return errBadResponse
	}
	return nil
}

// validTarget checks a request target as net/http's URL parser would before the lean path
// forwards it as it is: visible ASCII only (net/http refuses the rest), and every '%' starting
// an escape of two hex digits.
func validTarget(t []byte) bool {
	for i := 0; i < len(t); i++ {
		switch c := t[i]; {
		case c <= ' ' || c >= 0x7f:
			return false
		case c == '%':
			if i+2 >= len(t) {
				return false
			}
			if _, ok := hexDigit(t[i+1]); !ok {
				return false
			}
			if _, ok := hexDigit(t[i+2]); !ok {
				return false
			}
			i += 2
		}
	}
	return true
}

func version(b []byte) (int, bool) {
	if len(b) != 8 || string(b[:7]) != "HTTP/1." || b[7] < '0' || b[7] > '9' {
		return 0, false
	}
	return int(b[7] - '0'), true
}

// field parses name ":" OWS value OWS and notes what the proxy must know of it.
func (h *h1head) field(line, raw []byte) error {
	if len(h.fields) == maxFields {
		return errTooManyFields
	}
	colon := bytes.IndexByte(line, ':')
	if colon < 1 || !isToken(line[:colon]) {
		return errNotLean // also rejects obs-fold: a line starting with SP or HTAB
	}
	name, value := line[:colon], bytes.Trim(line[colon+1:], " \t")
	for _, c := range value {
		if c < ' ' && c != '\t' || c == 0x7f {
			return errNotLean
		}
	}
	f := h1field{name: name, value: value, line: raw}
	switch {
	case fold(name, "host"):
		h.host, h.hosts = value, h.hosts+1
	case fold(name, "content-length"):
		n, ok := parseLength(value)
		if !ok || h.contentLength >= 0 && n != h.contentLength {
			return errNotLean
		}
		h.contentLength = n
	case fold(name, "transfer-encoding"):
		if h.hasTE {
			return errNotLean // several: net/http decides
		}
		h.te, h.hasTE, f.hop = value, true, true
	case fold(name, "connection"):
		f.hop = true
		if err := h.connection(value); err != nil {
			return err
		}
	case fold(name, "upgrade"):
		h.upgrade, f.hop = true, true
	case fold(name, "expect"):
		h.expect = true
	case fold(name, "content-type"):
		h.grpc = len(value) >= 16 && fold(value[:16], "application/grpc")
	case fold(name, "keep-alive"), fold(name, "proxy-connection"), fold(name, "proxy-authorization"),
		fold(name, "proxy-authenticate"), fold(name, "te"), fold(name, "trailer"):
		f.hop = true
	}
	h.fields = append(h.fields, f)
	return nil
}

// connection notes the tokens of a Connection header.
func (h *h1head) connection(v []byte) error {
	for len(v) > 0 {
		var tok []byte
		if i := bytes.IndexByte(v, ','); i >= 0 {
			tok, v = v[:i], v[i+1:]
		} else {
			tok, v = v, nil
		}
		tok = bytes.Trim(tok, " \t")
		switch {
		case len(tok) == 0:
		case !isToken(tok):
			return errNotLean
		case fold(tok, "close"):
			h.close = true
		case fold(tok, "keep-alive"):
			h.keepAlive = true
		case fold(tok, "upgrade"):
			h.upgrade = true
		default:
			h.tokens = append(h.tokens, tok)
		}
	}
	return nil
}

// finish marks the fields the Connection header names as hop-by-hop, and applies HTTP/1.0's
// default of closing.
func (h *h1head) finish() {
	for _, tok := range h.tokens {
		for i := range h.fields {
			if bytes.EqualFold(h.fields[i].name, tok) {
				h.fields[i].hop = true
			}
		}
	}
	if h.minor == 0 && !h.keepAlive {
		h.close = true
	}
}

// parseLength parses a Content-Length: digits only, at most 18 of them.
func parseLength(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 18 {
		return 0, false
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// fold reports whether b equals the lowercase ASCII s, ignoring case.
func fold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range len(b) {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != s[i] {
			return false
		}
	}
	return true
}

// isToken reports whether b is an RFC 9110 token.
func isToken(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	for _, c := range b {
		if c >= 0x80 || !tokenChars[c] {
			return false
		}
	}
	return true
}

var tokenChars = func() (t [128]bool) {
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c], t[c-'a'+'A'] = true, true
	}
	for _, c := range "!#$%&'*+-.^_`|~" {
		t[c] = true
	}
	return t
}()
