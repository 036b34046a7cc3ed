package detect

// Protocol is what Detect found.
type Protocol uint8

const (
	// NeedMore means the bytes so far could still begin an HTTP/1 request line or the
	// HTTP/2 preface.
	NeedMore Protocol = iota
	// HTTP1 means a complete HTTP/1.x request line.
	HTTP1
	// HTTP2 means the complete HTTP/2 client connection preface.
	HTTP2
	// Opaque means neither: the connection is proxied as TCP.
	Opaque
)

func (p Protocol) String() string {
	switch p {
	case NeedMore:
		return "need-more"
	case HTTP1:
		return "http/1"
	case HTTP2:
		return "h2"
	case Opaque:
		return "opaque"
	}
	return "unknown"
}

// Preface is the HTTP/2 client connection preface (RFC 9113, section 3.4).
const Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

// maxMethod bounds the method token. The longest registered methods are 17 bytes
// (BASELINE-CONTROL, UPDATEREDIRECTREF); a longer token is taken for another protocol.
const maxMethod = 32

// Detect classifies a connection's first bytes; see the package comment. It does not
// retain prefix and does not allocate.
func Detect(prefix []byte) Protocol {
	// Empty lines before the request line are skipped, as RFC 9112 section 2.2 asks of a
	// server and as linkerd2-proxy's parser (httparse) and many applications do: a client
	// must not get its request past the proxy's HTTP handling, as opaque bytes, by
	// prefixing one.
	for len(prefix) > 0 && (prefix[0] == '\n' || prefix[0] == '\r') {
		switch {
		case prefix[0] == '\n':
			prefix = prefix[1:]
		case len(prefix) == 1:
			return NeedMore
		case prefix[1] == '\n':
			prefix = prefix[2:]
		default:
			return Opaque
		}
	}
	if len(prefix) == 0 {
		return NeedMore
	}
	n := min(len(prefix), len(Preface))
	if string(prefix[:n]) == Preface[:n] {
		if n == len(Preface) {
			return HTTP2
		}
		return NeedMore // "PRI * HTTP/" could still turn out to be HTTP/1.x
	}
	return requestLine(prefix)
}

// requestLine checks b against METHOD SP request-target SP "HTTP/1." DIGIT [CR] LF.
// A bare LF ends the line too, as RFC 9112 section 2.2 lets a recipient accept.
func requestLine(b []byte) Protocol {
	i := 0
	for ; i < len(b) && b[i] != ' '; i++ { // method = token
		if !isTchar(b[i]) || i == maxMethod {
			return Opaque
		}
	}
	if i == len(b) {
		return NeedMore
	}
	if i == 0 {
		return Opaque
	}
	i++ // SP
	start := i
	for ; i < len(b) && b[i] != ' '; i++ { // request-target: visible bytes, no controls
		if c := b[i]; c <= ' ' || c == 0x7f {
			return Opaque
		}
	}
	if i == len(b) {
		return NeedMore
	}
	if i == start {
		return Opaque
	}
	i++ // SP
	const version = "HTTP/1."
	for k := 0; k < len(version); k, i = k+1, i+1 {
		if i == len(b) {
			return NeedMore
		}
		if b[i] != version[k] {
			return Opaque
		}
	}
	if i == len(b) {
		return NeedMore
	}
	if b[i] < '0' || b[i] > '9' {
		return Opaque
	}
	i++
	if i < len(b) && b[i] == '\r' {
		i++
	}
	switch {
	case i == len(b):
		return NeedMore
	case b[i] == '\n':
		return HTTP1
	}
	return Opaque
}

// isTchar reports whether c may appear in a token (RFC 9110, section 5.6.2).
func isTchar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	switch c {
	case '!', '#', '$', '%', '&', '\'', '*', '+', '-', '.', '^', '_', '`', '|', '~':
		return true
	}
	return false
}
