package h2

import (
	"bytes"
	"errors"
	"strconv"

	"golang.org/x/net/http2/hpack"
)

// Header is a decoded header block: a request's, a response's, or trailers.
type Header struct {
	// The request pseudo-header fields (RFC 9113, section 8.3.1); Protocol is extended
	// CONNECT's :protocol.
	Method, Scheme, Authority, Path, Protocol string
	// Status is a response's :status (0 in a request or trailers).
	Status int
	// Fields are the other fields in their order; every name is lowercase.
	Fields []hpack.HeaderField
	// ContentLength is the content-length field's value, -1 when absent.
	ContentLength int64
}

// Get returns the value of the first field called name (lowercase), "" when there is none.
func (h *Header) Get(name string) string {
	for i := range h.Fields {
		if h.Fields[i].Name == name {
			return h.Fields[i].Value
		}
	}
	return ""
}

// Has reports whether a field called name (lowercase) is present.
func (h *Header) Has(name string) bool {
	for i := range h.Fields {
		if h.Fields[i].Name == name {
			return true
		}
	}
	return false
}

func (h *Header) reset() {
	h.Method, h.Scheme, h.Authority, h.Path, h.Protocol = "", "", "", "", ""
	h.Status, h.ContentLength = 0, -1
	clear(h.Fields)
	h.Fields = h.Fields[:0]
}

// copyFrom makes h a copy of o (its own Fields slice; the strings are shared).
func (h *Header) copyFrom(o *Header) {
	fields := append(h.Fields[:0], o.Fields...)
	*h = *o
	h.Fields = fields
}

// blockKind is what a header block is.
type blockKind uint8

const (
	requestBlock blockKind = iota
	responseBlock
	trailersBlock
)

// errMalformed is a header block that decodes but breaks HTTP/2's rules for fields (RFC 9113,
// section 8.2): the stream is reset with PROTOCOL_ERROR.
var errMalformed = errors.New("http2: malformed header block")

// errHeaderListTooLarge is a header block over MaxHeaderListSize.
var errHeaderListTooLarge = errors.New("http2: header list too large")

// decoder decodes the header blocks of one connection into a Header, validating every
// field. It must see every block the peer sends, in order (HPACK's dynamic table).
type decoder struct {
	dec     *hpack.Decoder
	h       *Header
	kind    blockKind
	regular bool // a regular field was seen: no more pseudo-header fields
	size    uint32
	limit   uint32
	err     error // the first problem of the block being decoded
}

func newDecoder(limit uint32) *decoder {
	d := &decoder{limit: limit}
	d.dec = hpack.NewDecoder(4096, d.emit)
	d.dec.SetMaxStringLength(int(limit))
	return d
}

// decode decodes a complete header block into h. A ConnError means HPACK failed (the
// connection cannot go on); errMalformed and errHeaderListTooLarge concern the stream only.
func (d *decoder) decode(block []byte, kind blockKind, h *Header) error {
	h.reset()
	d.h, d.kind, d.regular, d.size, d.err = h, kind, false, 0, nil
	if _, err := d.dec.Write(block); err != nil {
		return ConnError{ErrCodeCompression, "HPACK: " + err.Error()}
	}
	if err := d.dec.Close(); err != nil {
		return ConnError{ErrCodeCompression, "HPACK: " + err.Error()}
	}
	if d.err != nil {
		return d.err
	}
	switch kind {
	case requestBlock:
		if !validRequest(h) {
			return errMalformed
		}
	case responseBlock:
		if h.Status == 0 {
			return errMalformed
		}
	}
	return nil
}

// validRequest checks a request's pseudo-header fields (RFC 9113, section 8.3.1; RFC 8441
// for CONNECT with :protocol).
func validRequest(h *Header) bool {
	switch {
	case h.Method == "":
		return false
	case h.Method == "CONNECT" && h.Protocol == "":
		return h.Authority != "" && h.Scheme == "" && h.Path == ""
	case h.Method == "CONNECT":
		return h.Authority != "" && h.Scheme != "" && h.Path != ""
	case h.Protocol != "":
		return false
	}
	return h.Scheme != "" && (h.Path == "*" && h.Method == "OPTIONS" || len(h.Path) > 0 && h.Path[0] == '/')
}

// emit takes one decoded field.
func (d *decoder) emit(f hpack.HeaderField) {
	if d.err != nil {
		return
	}
	d.size += f.Size()
	if d.size > d.limit {
		d.err = errHeaderListTooLarge
		return
	}
	if len(f.Name) > 0 && f.Name[0] == ':' {
		if d.regular || !d.pseudo(f) {
			d.err = errMalformed
		}
		return
	}
	d.regular = true
	if !validName(f.Name) || !validValue(f.Value) || connectionSpecific(f) {
		d.err = errMalformed
		return
	}
	if f.Name == "content-length" && d.kind != trailersBlock {
		n, err := strconv.ParseUint(f.Value, 10, 63)
		if err != nil || len(f.Value) == 0 || f.Value[0] == '+' || d.h.ContentLength >= 0 && int64(n) != d.h.ContentLength {
			d.err = errMalformed
			return
		}
		d.h.ContentLength = int64(n)
	}
	d.h.Fields = append(d.h.Fields, f)
}

// pseudo records a pseudo-header field; false when it does not belong in the block or
// repeats.
func (d *decoder) pseudo(f hpack.HeaderField) bool {
	h := d.h
	set := func(p *string) bool {
		if *p != "" || f.Value == "" || !validValue(f.Value) {
			return false
		}
		*p = f.Value
		return true
	}
	switch d.kind {
	case requestBlock:
		switch f.Name {
		case ":method":
			return set(&h.Method)
		case ":scheme":
			return set(&h.Scheme)
		case ":authority":
			return set(&h.Authority)
		case ":path":
			return set(&h.Path)
		case ":protocol":
			return set(&h.Protocol)
		}
	case responseBlock:
		if f.Name == ":status" && h.Status == 0 && len(f.Value) == 3 {
			n, err := strconv.Atoi(f.Value)
			if err == nil && n >= 100 && n <= 999 {
				h.Status = n
				return true
			}
		}
	}
	return false
}

// validName reports a field name of lowercase token characters.
func validName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x80 || !nameChars[c] {
			return false
		}
	}
	return true
}

var nameChars = func() (t [128]bool) {
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c] = true
	}
	for _, c := range "!#$%&'*+-.^_`|~" {
		t[c] = true
	}
	return t
}()

// validValue reports a field value without NUL, CR, LF or other controls but tab, and
// without leading or trailing whitespace (RFC 9113, section 8.2.1).
func validValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return len(s) == 0 || s[0] != ' ' && s[0] != '\t' && s[len(s)-1] != ' ' && s[len(s)-1] != '\t'
}

// connectionSpecific reports the fields HTTP/2 forbids (RFC 9113, section 8.2.2); te is
// allowed with the value "trailers" only.
func connectionSpecific(f hpack.HeaderField) bool {
	switch f.Name {
	case "connection", "proxy-connection", "keep-alive", "transfer-encoding", "upgrade":
		return true
	case "te":
		return f.Value != "trailers"
	}
	return false
}

// encoder encodes header blocks for one connection.
type encoder struct {
	enc *hpack.Encoder
	buf bytes.Buffer
}

func newEncoder() *encoder {
	e := &encoder{}
	e.enc = hpack.NewEncoder(&e.buf)
	return e
}

// Edit changes the fields of a relayed request: Drop names fields (lowercase) not to
// forward, Add fields to append.
type Edit struct {
	Drop []string
	Add  []hpack.HeaderField
}

func (e *Edit) drops(name string) bool {
	if e == nil {
		return false
	}
	for _, d := range e.Drop {
		if d == name {
			return true
		}
	}
	return false
}

// encode encodes h (of kind) with edit applied into e.buf, which it returns.
func (e *encoder) encode(h *Header, kind blockKind, edit *Edit) []byte {
	e.buf.Reset()
	w := func(name, value string) { _ = e.enc.WriteField(hpack.HeaderField{Name: name, Value: value}) }
	switch kind {
	case requestBlock:
		w(":method", h.Method)
		if h.Scheme != "" {
			w(":scheme", h.Scheme)
		}
		if h.Authority != "" {
			w(":authority", h.Authority)
		}
		if h.Path != "" {
			w(":path", h.Path)
		}
		if h.Protocol != "" {
			w(":protocol", h.Protocol)
		}
	case responseBlock:
		w(":status", statusString(h.Status))
	}
	for i := range h.Fields {
		if f := h.Fields[i]; !edit.drops(f.Name) {
			_ = e.enc.WriteField(f)
		}
	}
	if edit != nil {
		for _, f := range edit.Add {
			_ = e.enc.WriteField(f)
		}
	}
	return e.buf.Bytes()
}

// statusString avoids formatting the common statuses.
func statusString(s int) string {
	switch s {
	case 200:
		return "200"
	case 204:
		return "204"
	case 400:
		return "400"
	case 403:
		return "403"
	case 404:
		return "404"
	case 500:
		return "500"
	case 502:
		return "502"
	case 503:
		return "503"
	}
	return strconv.Itoa(s)
}
