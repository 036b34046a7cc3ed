package h2

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"golang.org/x/net/http2/hpack"
)

// ServeHTTP serves the request with h, net/http style, on the calling goroutine: the slow
// path for what the relay does not do (a request to downgrade to HTTP/1, say). Call it
// once ServeStream returned without an upstream, from another goroutine. h gets an
// *http.Request whose body is the stream's (its window goes back as h reads it) and whose
// context, derived from ctx, ends when the stream does, and a ResponseWriter that is an
// http.Flusher and sends trailers (declared in a Trailer field, or named with
// http.TrailerPrefix). A panic with http.ErrAbortHandler resets the stream; a response left
// unwritten is an empty 200.
func (s *Stream) ServeHTTP(ctx context.Context, h http.Handler) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	body := &bodyPipe{s: s}
	body.cond.L = &body.mu
	s.fwd.Lock()
	if s.dead {
		s.fwd.Unlock()
		return
	}
	body.buf, body.end = s.early, s.earlyEnd
	s.early, s.body, s.cancel = nil, body, cancel
	s.fwd.Unlock()
	req, err := s.httpRequest(ctx, body)
	if err != nil {
		s.Respond(http.StatusBadRequest, nil, []byte("bad request target\n"))
		return
	}
	w := &responseWriter{s: s, hdr: http.Header{}}
	defer func() {
		if p := recover(); p != nil {
			if p != http.ErrAbortHandler {
				panic(p)
			}
			s.Reset(ErrCodeInternal)
		}
		_ = body.Close()
	}()
	h.ServeHTTP(w, req)
	w.finish()
}

// httpRequest builds the request of a server stream.
func (s *Stream) httpRequest(ctx context.Context, body *bodyPipe) (*http.Request, error) {
	h := &s.req
	u, err := url.ParseRequestURI(h.Path)
	if err != nil {
		return nil, err
	}
	hdr := make(http.Header, len(h.Fields))
	var cookies []string
	for _, f := range h.Fields {
		if f.Name == "cookie" {
			cookies = append(cookies, f.Value)
			continue
		}
		k := http.CanonicalHeaderKey(f.Name)
		hdr[k] = append(hdr[k], f.Value)
	}
	if len(cookies) > 0 {
		hdr["Cookie"] = []string{strings.Join(cookies, "; ")}
	}
	host := h.Authority
	if host == "" {
		host = hdr.Get("Host")
	}
	delete(hdr, "Host")
	req := &http.Request{Method: h.Method, URL: u, Proto: "HTTP/2.0", ProtoMajor: 2, Header: hdr, Host: host,
		RequestURI: h.Path, ContentLength: h.ContentLength, Body: body, RemoteAddr: s.c.nc.RemoteAddr().String()}
	if s.recvEndSeen() && len(body.buf) == 0 {
		req.ContentLength, req.Body = 0, http.NoBody
	}
	return req.WithContext(ctx), nil
}

// bodyPipe is a server stream's request body for ServeHTTP: the read loop appends what
// arrives (at most the stream's window), the handler reads it, giving the window back.
type bodyPipe struct {
	s      *Stream
	mu     sync.Mutex
	cond   sync.Cond
	buf    []byte
	end    bool
	err    error
	closed bool
}

// write takes body bytes from the read loop; false when the pipe is closed (the bytes are
// dropped and their window is the caller's to give back).
func (p *bodyPipe) write(data []byte, end bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.buf = append(p.buf, data...)
	p.end = p.end || end
	p.cond.Broadcast()
	return true
}

func (p *bodyPipe) fail(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err == nil {
		p.err = err
	}
	p.cond.Broadcast()
}

func (p *bodyPipe) Read(b []byte) (int, error) {
	p.mu.Lock()
	for len(p.buf) == 0 && !p.end && p.err == nil && !p.closed {
		p.cond.Wait()
	}
	switch {
	case p.closed:
		p.mu.Unlock()
		return 0, errors.New("http2: read on a closed body")
	case len(p.buf) > 0:
		n := copy(b, p.buf)
		p.buf = p.buf[:copy(p.buf, p.buf[n:])]
		p.mu.Unlock()
		p.s.c.credit(p.s, int64(n), nil)
		return n, nil
	case p.err != nil:
		err := p.err
		p.mu.Unlock()
		return 0, err
	}
	p.mu.Unlock()
	return 0, io.EOF
}

// Close drops what is left: its window goes back.
func (p *bodyPipe) Close() error {
	p.mu.Lock()
	n := len(p.buf)
	p.buf, p.closed = nil, true
	p.cond.Broadcast()
	p.mu.Unlock()
	if n > 0 {
		p.s.c.credit(nil, int64(n), nil)
	}
	return nil
}

// responseWriter writes a ServeHTTP handler's response on the stream, waiting for the
// peer's window as it must.
type responseWriter struct {
	s           *Stream
	hdr         http.Header
	wroteHeader bool
	declared    []string
	err         error
}

func (w *responseWriter) Header() http.Header { return w.hdr }

func (w *responseWriter) WriteHeader(code int) {
	if w.wroteHeader || w.err != nil {
		return
	}
	if code < 200 { // interim responses are not relayed by this path
		return
	}
	w.wroteHeader = true
	h := Header{Status: code}
	for k, vv := range w.hdr {
		switch {
		case k == "Trailer":
			for _, v := range vv {
				for _, t := range strings.Split(v, ",") {
					if t = strings.TrimSpace(t); t != "" {
						w.declared = append(w.declared, http.CanonicalHeaderKey(t))
					}
				}
			}
			continue
		case strings.HasPrefix(k, http.TrailerPrefix), hopField(k):
			continue
		}
		for _, v := range vv {
			h.Fields = append(h.Fields, hpack.HeaderField{Name: strings.ToLower(k), Value: v})
		}
	}
	c := w.s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if w.s.removed || c.closed || w.s.sentHeaders {
		w.err = ErrConnClosed
		return
	}
	c.writeHeadersLocked(w.s.id, c.enc.encode(&h, responseBlock, nil), false)
	w.s.sentHeaders = true
	c.flushLocked()
}

// hopField reports the fields HTTP/2 does not carry.
func hopField(k string) bool {
	switch k {
	case "Connection", "Keep-Alive", "Proxy-Connection", "Transfer-Encoding", "Upgrade":
		return true
	}
	return false
}

func (w *responseWriter) Write(p []byte) (int, error) {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if w.err != nil {
		return 0, w.err
	}
	c, s := w.s.c, w.s
	c.mu.Lock()
	defer c.mu.Unlock()
	written := 0
	for len(p) > 0 {
		if s.removed || c.closed {
			w.err = ErrConnClosed
			return written, w.err
		}
		n := c.writeDataLocked(s, p, false)
		p, written = p[n:], written+n
		if len(p) > 0 {
			c.flushLocked()
			c.cond.Wait() // for the peer's window
		}
	}
	c.flushLocked()
	return written, nil
}

// Flush does nothing more: every Write is flushed.
func (w *responseWriter) Flush() {}

// finish ends the response: its trailers, or an empty DATA with END_STREAM.
func (w *responseWriter) finish() {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if w.err != nil {
		return
	}
	var t Header
	for k, vv := range w.hdr {
		name, ok := strings.CutPrefix(k, http.TrailerPrefix)
		if !ok {
			for _, d := range w.declared {
				if d == k {
					name, ok = k, true
				}
			}
		}
		if ok {
			for _, v := range vv {
				t.Fields = append(t.Fields, hpack.HeaderField{Name: strings.ToLower(name), Value: v})
			}
		}
	}
	c, s := w.s.c, w.s
	c.mu.Lock()
	defer c.unlock()
	if s.removed || c.closed {
		return
	}
	if len(t.Fields) > 0 {
		c.writeHeadersLocked(s.id, c.enc.encode(&t, trailersBlock, nil), true)
		s.sentEnd = true
	} else {
		c.writeDataLocked(s, nil, true)
	}
	if !s.recvEnd {
		writeRST(c.bw, s.id, ErrCodeNo) // the request's body is not wanted any more
		c.removeLocked(s)
	} else {
		c.maybeRemoveLocked(s)
	}
	c.flushLocked()
}
