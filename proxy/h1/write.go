package h1

import (
	"bufio"
	"bytes"
	"strconv"
)

// WriteRequestHead writes req's head as the proxy forwards it: "METHOD target HTTP/1.1",
// "Host: host", the end-to-end fields but Host as the client sent them, then extra (whole
// header lines, CRLF included; may be nil) and the blank line. An empty target is "/".
// Write errors are the writer's: the caller's Flush reports them.
func WriteRequestHead(w *bufio.Writer, req *Head, target, host, extra []byte) {
	_, _ = w.Write(req.Method)
	_ = w.WriteByte(' ')
	if len(target) == 0 {
		_ = w.WriteByte('/')
	} else {
		_, _ = w.Write(target)
	}
	_, _ = w.WriteString(" HTTP/1.1\r\nHost: ")
	_, _ = w.Write(host)
	_, _ = w.WriteString("\r\n")
	for i := range req.Fields {
		if f := &req.Fields[i]; !f.Hop && !Fold(f.Name, "host") {
			_, _ = w.Write(f.Line)
		}
	}
	_, _ = w.Write(extra)
	_, _ = w.WriteString("\r\n")
}

// WriteResponseHead writes a response's status line (as HTTP/1.1) and end-to-end fields,
// then the framing and connection fields the proxy sets for a body of kind.
func WriteResponseHead(w *bufio.Writer, r *Head, kind BodyKind, closeClient bool) {
	_, _ = w.WriteString("HTTP/1.1 ")
	_, _ = w.Write(r.Raw[9 : 12+len(r.Reason)+2]) // "NNN reason\r\n" of the status line
	for i := range r.Fields {
		f := &r.Fields[i]
		if f.Hop || kind == ChunkedBody && Fold(f.Name, "content-length") {
			continue
		}
		_, _ = w.Write(f.Line)
	}
	if kind == ChunkedBody {
		_, _ = w.WriteString("Transfer-Encoding: chunked\r\n")
	}
	if closeClient {
		_, _ = w.WriteString("Connection: close\r\n")
	}
	_, _ = w.WriteString("\r\n")
}

// WriteError answers a request the proxy does not forward: plain text, the reason also in
// l5d-proxy-error (as linkerd2-proxy does), and "Connection: close" when closeAfter. It
// flushes w and returns the flush's error.
func WriteError(w *bufio.Writer, status int, msg string, closeAfter bool) error {
	msg = Sanitize(msg)
	_, _ = w.WriteString("HTTP/1.1 ")
	_, _ = w.WriteString(strconv.Itoa(status))
	_ = w.WriteByte(' ')
	_, _ = w.WriteString(StatusText(status))
	_, _ = w.WriteString("\r\nContent-Type: text/plain; charset=utf-8\r\nL5d-Proxy-Error: ")
	_, _ = w.WriteString(msg)
	_, _ = w.WriteString("\r\nContent-Length: ")
	_, _ = w.WriteString(strconv.Itoa(len(msg) + 1))
	if closeAfter {
		_, _ = w.WriteString("\r\nConnection: close")
	}
	_, _ = w.WriteString("\r\n\r\n")
	_, _ = w.WriteString(msg)
	_ = w.WriteByte('\n')
	return w.Flush()
}

// StatusText is the reason phrase of the statuses the proxy answers with itself.
func StatusText(code int) string {
	switch code {
	case 403:
		return "Forbidden"
	case 404:
		return "Not Found"
	case 500:
		return "Internal Server Error"
	case 502:
		return "Bad Gateway"
	case 503:
		return "Service Unavailable"
	case 504:
		return "Gateway Timeout"
	}
	return "Error"
}

// maxMessage bounds an error message that goes on the wire.
const maxMessage = 200

// Sanitize bounds a message to 200 bytes (then "...") and makes it fit for a header value:
// control characters other than tab become spaces.
func Sanitize(s string) string {
	if len(s) > maxMessage {
		s = s[:maxMessage] + "..."
	}
	if !bytes.ContainsFunc([]byte(s), func(r rune) bool { return r < ' ' && r != '\t' || r == 0x7f }) {
		return s
	}
	b := []byte(s)
	for i, c := range b {
		if c < ' ' && c != '\t' || c == 0x7f {
			b[i] = ' '
		}
	}
	return string(b)
}
