package httpproxy

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/netip"
	"strings"
)

// DefaultMaxHeaderBytes bounds a request's head (request line and headers).
const DefaultMaxHeaderBytes = 64 << 10

// bufSize is the read buffer; the head bound is enforced with this much slack, as net/http
// does (its read-ahead may take that much past the head).
const bufSize = 4 << 10

// Options configures a Reader. The zero value of a field means its default.
type Options struct {
	// MaxHeaderBytes bounds each request's head, answered with 431 beyond it.
	MaxHeaderBytes int
	// OrigDst is the connection's original destination, the zero value when unknown.
	OrigDst netip.AddrPort
}

// Reader reads the requests a client sends on one connection to the outbound listener.
// It is used by one goroutine at a time, like the connection.
type Reader struct {
	lim  limitReader
	br   *bufio.Reader
	opts Options
	prev *http.Request
}

// NewReader returns a Reader of the requests on r (the client connection, or a
// detect.Conn that replays its first bytes).
func NewReader(r io.Reader, opts Options) *Reader {
	if opts.MaxHeaderBytes <= 0 {
		opts.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	rd := &Reader{opts: opts}
	rd.lim.r, rd.lim.n = r, math.MaxInt64 // each head's bound is set by Next
	rd.br = bufio.NewReaderSize(&rd.lim, bufSize)
	return rd
}

// Next reads the next request and classifies it (see Classify). It first closes the body of
// the request it returned before, which reads what the caller left of it. It returns io.EOF
// when the client closed the connection between requests, an *Error for a request the
// proxy refuses (answer it with WriteResponse, then close), and any other error (a read
// error, or a connection cut inside a request head, which wraps io.ErrUnexpectedEOF) when
// the connection is to be closed without an answer.
func (r *Reader) Next() (*Request, error) {
	if r.prev != nil {
		err := r.prev.Body.Close()
		r.prev = nil
		if err != nil {
			return nil, fmt.Errorf("http proxy: finish the previous request's body: %w", err)
		}
	}
	if _, err := r.br.Peek(1); err != nil { // between requests: a clean close is io.EOF
		if errors.Is(err, io.EOF) {
			return nil, io.EOF
		}
		return nil, fmt.Errorf("http proxy: read: %w", err)
	}
	// The source is cut off once the head cannot fit the bound any more (with bufSize of
	// slack for read-ahead); the head's exact size is checked once it is parsed.
	before := r.br.Buffered()
	budget := int64(r.opts.MaxHeaderBytes) + bufSize - int64(before)
	r.lim.n = budget
	req, err := http.ReadRequest(r.br)
	head := budget - r.lim.n + int64(before) - int64(r.br.Buffered())
	exhausted := r.lim.n <= 0
	r.lim.n = math.MaxInt64 // the body, or a tunnel, is not bounded here
	switch {
	case err == nil && head <= int64(r.opts.MaxHeaderBytes):
	case err == nil || exhausted:
		return nil, &Error{Status: http.StatusRequestHeaderFieldsTooLarge,
			Reason: fmt.Sprintf("request head over %d bytes", r.opts.MaxHeaderBytes)}
	case r.lim.err != nil:
		return nil, fmt.Errorf("http proxy: read: %w", r.lim.err)
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return nil, fmt.Errorf("http proxy: connection closed inside a request head: %w", io.ErrUnexpectedEOF)
	default:
		return nil, badRequest("malformed request: %s", shortErr(err))
	}
	pr, err := Classify(req, r.opts.OrigDst)
	if err != nil {
		return nil, err // the body is left unread: the connection is closed after the answer
	}
	r.prev = req
	return pr, nil
}

// Buffered returns the bytes read from the connection but not yet consumed: after a CONNECT,
// the first bytes of the tunnel, which the caller sends before copying the connection
// itself. The Reader must not be used after Buffered.
func (r *Reader) Buffered() []byte {
	b, _ := r.br.Peek(r.br.Buffered())
	return append([]byte(nil), b...)
}

// shortErr bounds a net/http parse error, which can quote a whole request line.
func shortErr(err error) string {
	s := err.Error()
	if len(s) > 120 {
		s = s[:120] + "..."
	}
	return strings.ToValidUTF8(s, "?")
}

// limitReader passes reads through while n > 0, and then reports exhaustion as end of
// stream; n is reset by its owner. err keeps the last real read error.
type limitReader struct {
	r   io.Reader
	n   int64
	err error
}

func (l *limitReader) Read(p []byte) (int, error) {
	if l.n <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	n, err := l.r.Read(p)
	l.n -= int64(n)
	if err != nil && !errors.Is(err, io.EOF) {
		l.err = err
	}
	return n, err
}
