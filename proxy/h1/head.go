package h1

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
)

// Errors. ErrNotLean and ErrHeadTooLarge are for a request to hand to net/http's server;
// ErrBadResponse for a response to answer with a 502.
var (
	ErrNotLean       = errors.New("request is not for the lean HTTP/1.1 path")
	ErrHeadTooLarge  = errors.New("message head too large")
	ErrBadResponse   = errors.New("malformed response from upstream")
	ErrTooManyFields = errors.New("too many header fields")
)

// maxFields bounds the header fields of one head (net/http has no such bound; a request with
// more goes to net/http).
const maxFields = 128

// Field is one header line.
type Field struct {
	Name, Value []byte
	Line        []byte // the raw line with its CRLF, written as it is when forwarded
	Hop         bool   // hop-by-hop (or dropped by the caller): not forwarded
}

// Head is one HTTP/1.x message head, parsed in place: every slice points into Raw. It is
// reused for every message of a connection; nothing in it stays valid after the next read.
type Head struct {
	Raw    []byte // every byte of the head, the final CRLF included
	Fields []Field
	tokens [][]byte // the Connection header's tokens other than close, keep-alive, upgrade

	Method, Target []byte // request line
	Minor          int    // HTTP/1.minor
	Status         int    // status line
	Reason         []byte // the status line after the code, with its leading space

	Host          []byte // the (last) Host field's value
	Hosts         int    // how many Host fields
	ContentLength int64  // -1 when absent
	TE            []byte // the Transfer-Encoding field's value
	HasTE         bool   // a Transfer-Encoding field (TE may be empty)
	Close         bool   // Connection: close (or HTTP/1.0 without keep-alive)
	KeepAlive     bool   // Connection: keep-alive
	Upgrade       bool   // Connection: upgrade, or an Upgrade header
	Expect        bool
	GRPC          bool // Content-Type: application/grpc...
}

// DiscardEmptyLines drops the CR and LF bytes at the front of what br holds buffered,
// without reading more, and reports whether the buffer held nothing else. A server loop
// calls it between requests: RFC 9112 section 2.2 asks a server to ignore empty lines
// before a request line (clients send one after a POST body), and a connection that sent
// only those is still idle, waiting for its request.
func DiscardEmptyLines(br *bufio.Reader) (onlyEmpty bool) {
	n := br.Buffered()
	b, _ := br.Peek(n)
	i := 0
	for i < n && (b[i] == '\r' || b[i] == '\n') {
		i++
	}
	_, _ = br.Discard(i)
	return i == n
}

// ReadHead reads one head (up to and including the blank line) into h.Raw, at most limit
// bytes. It returns io.EOF when the stream ends before the first byte.
func ReadHead(br *bufio.Reader, h *Head, limit int) error {
	h.Raw = h.Raw[:0]
	start := 0 // where the current line starts in raw
	for {
		line, err := br.ReadSlice('\n')
		h.Raw = append(h.Raw, line...)
		if len(h.Raw) > limit {
			return ErrHeadTooLarge
		}
		switch {
		case errors.Is(err, bufio.ErrBufferFull): // a line longer than the buffer: read on
			continue
		case err != nil && len(h.Raw) > 0:
			return fmt.Errorf("head cut short: %w", err)
		case err != nil:
			return err
		}
		if l := h.Raw[start:]; len(l) == 2 && l[0] == '\r' || len(l) == 1 {
			if start == 0 {
				return ErrNotLean // an empty line before the start line
			}
			return nil
		}
		start = len(h.Raw)
	}
}

// lines calls f for every line of raw (without its line ending) up to the blank line, and
// fails on a line that does not end with CRLF or holds a CR elsewhere.
func (h *Head) lines(f func(i int, line, rawLine []byte) error) error {
	rest := h.Raw
	for i := 0; ; i++ {
		n := bytes.IndexByte(rest, '\n')
		if n < 1 || rest[n-1] != '\r' {
			return ErrNotLean
		}
		line := rest[:n-1]
		if len(line) == 0 {
			return nil
		}
		if bytes.IndexByte(line, '\r') >= 0 {
			return ErrNotLean
		}
		if err := f(i, line, rest[:n+1]); err != nil {
			return err
		}
		rest = rest[n+1:]
	}
}

func (h *Head) reset() {
	h.Fields, h.tokens = h.Fields[:0], h.tokens[:0]
	h.Method, h.Target, h.Reason, h.Host, h.TE = nil, nil, nil, nil, nil
	h.Minor, h.Status, h.Hosts, h.HasTE = 0, 0, 0, false
	h.ContentLength = -1
	h.Close, h.KeepAlive, h.Upgrade, h.Expect, h.GRPC = false, false, false, false, false
}

// ParseRequest parses a request head read by ReadHead. ErrNotLean means the lean path does
// not take it (net/http's server decides what it is).
func (h *Head) ParseRequest() error {
	h.reset()
	err := h.lines(func(i int, line, raw []byte) error {
		if i == 0 {
			return h.requestLine(line)
		}
		return h.field(line, raw)
	})
	if err != nil {
		return ErrNotLean
	}
	h.finish()
	return nil
}

// ParseResponse parses a response head read by ReadHead; ErrBadResponse when it is not one
// the lean path relays exactly (also a transfer coding other than chunked, and any transfer
// coding in an HTTP/1.0 response: RFC 9112 section 6.1 has its framing treated as faulty,
// and net/http ignores the field there, reading to the end).
func (h *Head) ParseResponse() error {
	h.reset()
	err := h.lines(func(i int, line, raw []byte) error {
		if i == 0 {
			return h.statusLine(line)
		}
		return h.field(line, raw)
	})
	if err != nil || h.HasTE && (!Fold(h.TE, "chunked") || h.Minor == 0) {
		return ErrBadResponse
	}
	h.finish()
	return nil
}

// requestLine parses METHOD SP request-target SP HTTP/1.x, strictly.
func (h *Head) requestLine(line []byte) error {
	sp1 := bytes.IndexByte(line, ' ')
	if sp1 < 1 || !isToken(line[:sp1]) {
		return ErrNotLean
	}
	rest := line[sp1+1:]
	sp2 := bytes.IndexByte(rest, ' ')
	if sp2 < 1 {
		return ErrNotLean
	}
	h.Method, h.Target = line[:sp1], rest[:sp2]
	if !validTarget(h.Target) {
		return ErrNotLean
	}
	minor, ok := version(rest[sp2+1:])
	if !ok {
		return ErrNotLean
	}
	h.Minor = minor
	return nil
}

// statusLine parses HTTP/1.x SP 3DIGIT [SP reason].
func (h *Head) statusLine(line []byte) error {
	if len(line) < 12 || line[8] != ' ' {
		return ErrBadResponse
	}
	minor, ok := version(line[:8])
	if !ok {
		return ErrBadResponse
	}
	code := line[9:12]
	for _, c := range code {
		if c < '0' || c > '9' {
			return ErrBadResponse
		}
	}
	if len(line) > 12 && line[12] != ' ' {
		return ErrBadResponse
	}
	for _, c := range line[12:] {
		if c < ' ' && c != '\t' || c == 0x7f {
			return ErrBadResponse
		}
	}
	h.Minor, h.Status, h.Reason = minor, int(code[0]-'0')*100+int(code[1]-'0')*10+int(code[2]-'0'), line[12:]
	if h.Status < 100 {
		return ErrBadResponse
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
			if _, ok := HexDigit(t[i+1]); !ok {
				return false
			}
			if _, ok := HexDigit(t[i+2]); !ok {
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
func (h *Head) field(line, raw []byte) error {
	if len(h.Fields) == maxFields {
		return ErrTooManyFields
	}
	colon := bytes.IndexByte(line, ':')
	if colon < 1 || !isToken(line[:colon]) {
		return ErrNotLean // also rejects obs-fold: a line starting with SP or HTAB
	}
	name, value := line[:colon], bytes.Trim(line[colon+1:], " \t")
	for _, c := range value {
		if c < ' ' && c != '\t' || c == 0x7f {
			return ErrNotLean
		}
	}
	f := Field{Name: name, Value: value, Line: raw}
	switch {
	case Fold(name, "host"):
		h.Host, h.Hosts = value, h.Hosts+1
	case Fold(name, "content-length"):
		n, ok := parseLength(value)
		if !ok || h.ContentLength >= 0 && n != h.ContentLength {
			return ErrNotLean
		}
		h.ContentLength = n
	case Fold(name, "transfer-encoding"):
		if h.HasTE {
			return ErrNotLean // several: net/http decides
		}
		h.TE, h.HasTE, f.Hop = value, true, true
	case Fold(name, "connection"):
		f.Hop = true
		if err := h.connection(value); err != nil {
			return err
		}
	case Fold(name, "upgrade"):
		h.Upgrade, f.Hop = true, true
	case Fold(name, "expect"):
		h.Expect = true
	case Fold(name, "content-type"):
		h.GRPC = len(value) >= 16 && Fold(value[:16], "application/grpc")
	case Fold(name, "keep-alive"), Fold(name, "proxy-connection"), Fold(name, "proxy-authorization"),
		Fold(name, "proxy-authenticate"), Fold(name, "te"), Fold(name, "trailer"):
		f.Hop = true
	}
	h.Fields = append(h.Fields, f)
	return nil
}

// connection notes the tokens of a Connection header.
func (h *Head) connection(v []byte) error {
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
			return ErrNotLean
		case Fold(tok, "close"):
			h.Close = true
		case Fold(tok, "keep-alive"):
			h.KeepAlive = true
		case Fold(tok, "upgrade"):
			h.Upgrade = true
		default:
			h.tokens = append(h.tokens, tok)
		}
	}
	return nil
}

// finish marks the fields the Connection header names as hop-by-hop, and applies HTTP/1.0's
// default of closing.
func (h *Head) finish() {
	for _, tok := range h.tokens {
		for i := range h.Fields {
			if bytes.EqualFold(h.Fields[i].Name, tok) {
				h.Fields[i].Hop = true
			}
		}
	}
	if h.Minor == 0 && !h.KeepAlive {
		h.Close = true
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

// Fold reports whether b equals the lowercase ASCII s, ignoring case.
func Fold(b []byte, s string) bool {
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
