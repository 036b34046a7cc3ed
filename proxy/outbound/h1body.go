package outbound

import (
	"bufio"
	"errors"
	"fmt"
	"io"
)

// Message bodies on the lean HTTP/1.1 path are relayed from one connection's bufio.Reader to
// the other's bufio.Writer in their framing, as they come: no copy besides the writer's
// buffer, no allocation. The writer is flushed whenever the reader has nothing buffered, so
// a streamed body reaches the client as soon as it arrives.

var errBadChunk = errors.New("malformed chunked body")

// errUpstreamBody wraps a failure reading a body from upstream, so the caller can tell it
// from a failure writing to the client.
type errUpstreamBody struct{ err error }

func (e errUpstreamBody) Error() string { return "read upstream body: " + e.err.Error() }
func (e errUpstreamBody) Unwrap() error { return e.err }

// relayN copies exactly n bytes.
func relayN(dst *bufio.Writer, src *bufio.Reader, n int64) error {
	for n > 0 {
		if src.Buffered() == 0 {
			if err := dst.Flush(); err != nil {
				return err
			}
			if _, err := src.Peek(1); err != nil {
				if errors.Is(err, io.EOF) {
					err = io.ErrUnexpectedEOF
				}
				return errUpstreamBody{err}
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

// relayEOF copies until src ends (a body delimited by the connection's close).
func relayEOF(dst *bufio.Writer, src *bufio.Reader) error {
	for {
		if src.Buffered() == 0 {
			if err := dst.Flush(); err != nil {
				return err
			}
			if _, err := src.Peek(1); err != nil {
				if errors.Is(err, io.EOF) {
					return nil
				}
				return errUpstreamBody{err}
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

// relayChunked copies a chunked body as it is, chunk extensions and trailers included,
// checking its framing: each chunk-size line is hex digits (at most 15) and optional
// extensions, each chunk ends with CRLF, and the trailer section ends with an empty line.
func relayChunked(dst *bufio.Writer, src *bufio.Reader) error {
	for {
		line, err := readLine(dst, src)
		if err != nil {
			return err
		}
		size, err := chunkSize(line)
		if err != nil {
			return errUpstreamBody{err}
		}
		if _, err := dst.Write(line); err != nil {
			return err
		}
		if size == 0 {
			return relayTrailers(dst, src)
		}
		if err := relayN(dst, src, size); err != nil {
			return err
		}
		crlf, err := readLine(dst, src)
		if err != nil {
			return err
		}
		if len(crlf) != 2 {
			return errUpstreamBody{errBadChunk}
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
			return errUpstreamBody{errBadChunk}
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
		return nil, errUpstreamBody{errBadChunk}
	case errors.Is(err, io.EOF):
		return nil, errUpstreamBody{io.ErrUnexpectedEOF}
	case err != nil:
		return nil, errUpstreamBody{err}
	case len(line) < 2 || line[len(line)-2] != '\r':
		return nil, errUpstreamBody{errBadChunk}
	}
	return line, nil
}

// chunkSize parses a chunk-size line: 1 to 15 hex digits, then nothing, or ";" and
// extensions (any visible characters, spaces and tabs).
func chunkSize(line []byte) (int64, error) {
	line = line[:len(line)-2]
	var n int64
	i := 0
	for ; i < len(line); i++ {
		d, ok := hexDigit(line[i])
		if !ok {
			break
		}
		if i == 15 {
			return 0, fmt.Errorf("%w: chunk size over 15 hex digits", errBadChunk)
		}
		n = n<<4 | int64(d)
	}
	if i == 0 {
		return 0, fmt.Errorf("%w: no chunk size", errBadChunk)
	}
	rest := line[i:]
	for len(rest) > 0 && (rest[0] == ' ' || rest[0] == '\t') {
		rest = rest[1:]
	}
	if len(rest) > 0 && rest[0] != ';' {
		return 0, fmt.Errorf("%w: junk after the chunk size", errBadChunk)
	}
	for _, c := range rest {
		if c < ' ' && c != '\t' || c == 0x7f {
			return 0, fmt.Errorf("%w: control character in a chunk extension", errBadChunk)
		}
	}
	return n, nil
}

func hexDigit(c byte) (byte, bool) {
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
	var h h1head
	h.contentLength = -1
	return h.field(line, nil) == nil
}
