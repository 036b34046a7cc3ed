package h1

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/http"
)

// Message bodies are relayed from one connection's bufio.Reader to the other's bufio.Writer
// in their framing, as they come: no copy besides the writer's buffer, no allocation. The
// writer is flushed whenever the reader has nothing buffered, so a streamed body reaches the
// client as soon as it arrives.

// ErrBadChunk is a chunked body whose framing is wrong.
var ErrBadChunk = errors.New("malformed chunked body")

// ErrChunkOverhead is a chunked body with too much besides its data (long chunk extensions
// on small chunks), refused as net/http's chunked reader refuses it; it is an ErrBadChunk.
var ErrChunkOverhead = fmt.Errorf("%w: too much non-data (chunk extensions)", ErrBadChunk)

// SourceError wraps a failure reading a body from its source (the upstream), so the caller
// can tell it from a failure writing to the destination.
type SourceError struct{ Err error }

func (e SourceError) Error() string { return "read upstream body: " + e.Err.Error() }
func (e SourceError) Unwrap() error { return e.Err }

// RelayN copies exactly n bytes.
func RelayN(dst *bufio.Writer, src *bufio.Reader, n int64) error {
	for n > 0 {
		if src.Buffered() == 0 {
			if err := dst.Flush(); err != nil {
				return err
			}
			if _, err := src.Peek(1); err != nil {
				if errors.Is(err, io.EOF) {
					err = io.ErrUnexpectedEOF
				}
				return SourceError{err}
			}
		}
		b, _ := src.Peek(int(min(int64(src.Buffered()), n)))
		if _, err := dst.Write(b); err != nil {
			return err
		}
		_, _ = src.Discard(len(b))
		n -= int64(len(b))
	}
	return nil
}

// RelayEOF copies until src ends (a body delimited by the connection's close).
func RelayEOF(dst *bufio.Writer, src *bufio.Reader) error {
	for {
		if src.Buffered() == 0 {
			if err := dst.Flush(); err != nil {
				return err
			}
			if _, err := src.Peek(1); err != nil {
				if errors.Is(err, io.EOF) {
					return nil
				}
				return SourceError{err}
			}
		}
		b, _ := src.Peek(src.Buffered())
		if _, err := dst.Write(b); err != nil {
			return err
		}
		_, _ = src.Discard(len(b))
	}
}

// maxChunkLine bounds a chunk-size line (size and extensions) and a trailer line.
const maxChunkLine = 4096

// The overhead budget of a chunked body, net/http's (net/http/internal/chunked.go,
// chunkedReader.beginChunk): each chunk adds its chunk-size line (extensions and CRLF
// included; net/http counts the line without its CRLF plus the CRLF after the data, the same
// number) and takes away chunkAllowance plus twice its data size; the running excess never
// goes below zero, and a body is refused once it passes maxChunkExcess, checked at every
// chunk-size line but the last chunk's ("0": net/http's end of body takes precedence over
// the check there; that line is still bounded by maxChunkLine). One byte per chunk
// ("1\r\nX\r\n") stays within it however long the body; kilobytes of extensions per byte
// of data do not. The trailer section does not count (net/http bounds it as a header).
const (
	chunkAllowance = 16
	maxChunkExcess = 16 << 10
)

// chunkExcess is the running excess after a chunk-size line of n bytes (with its CRLF) for
// a chunk of size bytes, or ErrChunkOverhead once it is over budget (not for the last chunk).
func chunkExcess(excess int64, n int, size int64) (int64, error) {
	excess = max(excess+int64(n)-chunkAllowance-2*size, 0)
	if excess > maxChunkExcess && size > 0 {
		return excess, ErrChunkOverhead
	}
	return excess, nil
}

// RelayChunked copies a chunked body as it is, chunk extensions and trailers included,
// checking its framing: each chunk-size line is hex digits (at most 15) and optional
// extensions, each chunk ends with CRLF, and the trailer section ends with an empty line.
// A body whose chunk-size lines outweigh its data past net/http's budget (see
// maxChunkExcess) is refused with ErrChunkOverhead before the line that passes it is
// written.
func RelayChunked(dst *bufio.Writer, src *bufio.Reader) error {
	var excess int64
	for {
		line, err := readLine(dst, src)
		if err != nil {
			return err
		}
		size, err := chunkSize(line)
		if err != nil {
			return SourceError{err}
		}
		if excess, err = chunkExcess(excess, len(line), size); err != nil {
			return SourceError{err}
		}
		if _, err := dst.Write(line); err != nil {
			return err
		}
		if size == 0 {
			return relayTrailers(dst, src)
		}
		if err := RelayN(dst, src, size); err != nil {
			return err
		}
		crlf, err := readLine(dst, src)
		if err != nil {
			return err
		}
		if len(crlf) != 2 {
			return SourceError{ErrBadChunk}
		}
		if _, err := dst.Write(crlf); err != nil {
			return err
		}
	}
}

// relayTrailers copies the trailer lines and the empty line that ends them.
func relayTrailers(dst *bufio.Writer, src *bufio.Reader) error {
	for {
		line, err := readLine(dst, src)
		if err != nil {
			return err
		}
		if len(line) > 2 && !validTrailer(line[:len(line)-2]) {
			return SourceError{ErrBadChunk}
		}
		if _, err := dst.Write(line); err != nil {
			return err
		}
		if len(line) == 2 {
			return nil
		}
	}
}

// readLine reads one CRLF-terminated line (returned with its CRLF, valid until the next
// read), flushing dst first when it would wait.
func readLine(dst *bufio.Writer, src *bufio.Reader) ([]byte, error) {
	if src.Buffered() == 0 {
		if err := dst.Flush(); err != nil {
			return nil, err
		}
	}
	line, err := src.ReadSlice('\n')
	switch {
	case errors.Is(err, bufio.ErrBufferFull) || len(line) > maxChunkLine:
		return nil, SourceError{ErrBadChunk}
	case errors.Is(err, io.EOF):
		return nil, SourceError{io.ErrUnexpectedEOF}
	case err != nil:
		return nil, SourceError{err}
	case len(line) < 2 || line[len(line)-2] != '\r':
		return nil, SourceError{ErrBadChunk}
	}
	return line, nil
}

// chunkSize parses a chunk-size line: 1 to 15 hex digits, then nothing, or ";" and
// extensions (any visible characters, spaces and tabs). Spaces and tabs may end the line
// but may not stand between the size and its ";": RFC 9112 allows them there (BWS), and
// net/http refuses them ("invalid byte in chunk length"), so a peer's reader could frame
// the body differently from ours.
func chunkSize(line []byte) (int64, error) {
	line = line[:len(line)-2]
	var n int64
	i := 0
	for ; i < len(line); i++ {
		d, ok := HexDigit(line[i])
		if !ok {
			break
		}
		if i == 15 {
			return 0, fmt.Errorf("%w: chunk size over 15 hex digits", ErrBadChunk)
		}
		n = n<<4 | int64(d)
	}
	if i == 0 {
		return 0, fmt.Errorf("%w: no chunk size", ErrBadChunk)
	}
	rest := line[i:]
	if len(rest) > 0 && rest[0] != ';' {
		ws := rest
		for len(ws) > 0 && (ws[0] == ' ' || ws[0] == '\t') {
			ws = ws[1:]
		}
		switch {
		case len(ws) == 0:
			rest = ws
		case ws[0] == ';':
			return 0, fmt.Errorf("%w: space before a chunk extension", ErrBadChunk)
		default:
			return 0, fmt.Errorf("%w: junk after the chunk size", ErrBadChunk)
		}
	}
	for _, c := range rest {
		if c < ' ' && c != '\t' || c == 0x7f {
			return 0, fmt.Errorf("%w: control character in a chunk extension", ErrBadChunk)
		}
	}
	return n, nil
}

// HexDigit is the value of a hex digit.
func HexDigit(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// validTrailer checks a trailer field line (name ":" value, no control characters).
func validTrailer(line []byte) bool {
	var h Head
	h.ContentLength = -1
	return h.field(line, nil) == nil
}

// BodyKind is how a response's body is delimited.
type BodyKind uint8

// The kinds of response body.
const (
	NoBody BodyKind = iota
	LengthBody
	ChunkedBody
	EOFBody // until the upstream closes
)

// ResponseBody says how the response res to req is delimited (RFC 9112, section 6.3).
func ResponseBody(req, res *Head) (BodyKind, error) {
	switch {
	case res.Status == http.StatusSwitchingProtocols:
		return NoBody, errors.New("upstream switched protocols unasked")
	case string(req.Method) == http.MethodHead || res.Status < 200 || res.Status == 204 || res.Status == 304:
		return NoBody, nil
	case res.HasTE && Fold(res.TE, "chunked"):
		return ChunkedBody, nil
	case res.HasTE:
		return NoBody, errors.New("upstream sent a transfer coding other than chunked")
	case res.ContentLength >= 0:
		return LengthBody, nil
	}
	return EOFBody, nil
}

// RelayBody copies a response body of kind from src to dst.
func RelayBody(dst *bufio.Writer, src *bufio.Reader, kind BodyKind, length int64) error {
	switch kind {
	case LengthBody:
		return RelayN(dst, src, length)
	case ChunkedBody:
		return RelayChunked(dst, src)
	case EOFBody:
		return RelayEOF(dst, src)
	}
	return nil
}
