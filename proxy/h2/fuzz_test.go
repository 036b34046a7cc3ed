package h2

import (
	"bufio"
	"bytes"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2/hpack"
)

// fuzzConn is a connection whose peer sent in and reads nothing back.
type fuzzConn struct {
	r      *bytes.Reader
	mu     sync.Mutex
	closed bool
}

func newFuzzConn(in []byte) *fuzzConn { return &fuzzConn{r: bytes.NewReader(in)} }

func (c *fuzzConn) Read(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return 0, net.ErrClosed
	}
	return c.r.Read(p)
}
func (c *fuzzConn) Write(p []byte) (int, error) { return len(p), nil }
func (c *fuzzConn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	return nil
}
func (*fuzzConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (*fuzzConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (*fuzzConn) SetDeadline(time.Time) error      { return nil }
func (*fuzzConn) SetReadDeadline(time.Time) error  { return nil }
func (*fuzzConn) SetWriteDeadline(time.Time) error { return nil }

// fuzzHandler relays every request to up when it can take one, and answers the others.
type fuzzHandler struct{ up *Conn }

func (h fuzzHandler) ServeStream(st *Stream) (*Conn, *Edit, Observer) {
	if st.Request().Path == "/answer" || !h.up.reserve() {
		st.Respond(http.StatusServiceUnavailable, []hpack.HeaderField{{Name: "x", Value: "y"}}, []byte("no"))
		return nil, nil, nil
	}
	return h.up, &Edit{Drop: []string{"x-drop"}}, nopObserver{}
}

type nopObserver struct{}

func (nopObserver) Header(*Header, bool) {}
func (nopObserver) Done(*Stream, error)  {}

// frames builds a byte stream of frames for the seeds.
type frames struct {
	buf bytes.Buffer
	bw  *bufio.Writer
	enc *encoder
}

func newFrames() *frames {
	f := &frames{enc: newEncoder()}
	f.bw = bufio.NewWriter(&f.buf)
	return f
}

func (f *frames) settings() *frames {
	writeSettings(f.bw, setting{settingInitialWindowSize, 10})
	return f
}
func (f *frames) raw(b string) *frames        { _, _ = f.bw.WriteString(b); return f }
func (f *frames) window(id, n uint32) *frames { writeWindowUpdate(f.bw, id, n); return f }
func (f *frames) rst(id uint32) *frames       { writeRST(f.bw, id, ErrCodeCancel); return f }
func (f *frames) data(id uint32, b string, end bool) *frames {
	flags := uint8(0)
	if end {
		flags = flagEndStream
	}
	writeFrameHeader(f.bw, len(b), frameData, flags, id)
	_, _ = f.bw.WriteString(b)
	return f
}
func (f *frames) headers(id uint32, h *Header, kind blockKind, end bool) *frames {
	block := f.enc.encode(h, kind, nil)
	flags := uint8(flagEndHeaders)
	if end {
		flags |= flagEndStream
	}
	writeFrameHeader(f.bw, len(block), frameHeaders, flags, id)
	_, _ = f.bw.Write(block)
	return f
}
func (f *frames) bytes() []byte { _ = f.bw.Flush(); return f.buf.Bytes() }

// FuzzConn feeds a server connection (relaying to a client connection) frames from a
// client and from an upstream: whatever they hold, nothing panics and both connections end
// when their input does.
func FuzzConn(f *testing.F) {
	get := &Header{Method: "GET", Scheme: "http", Authority: "web", Path: "/", Fields: []hpack.HeaderField{{Name: "x-drop", Value: "1"}}}
	post := &Header{Method: "POST", Scheme: "http", Authority: "web", Path: "/answer", ContentLength: -1}
	ok := &Header{Status: 200, Fields: []hpack.HeaderField{{Name: "content-type", Value: "application/grpc"}}}
	trailers := &Header{Fields: []hpack.HeaderField{{Name: "grpc-status", Value: "0"}}}
	f.Add(newFrames().raw(clientPreface).settings().headers(1, get, requestBlock, true).bytes(),
		newFrames().settings().headers(1, ok, responseBlock, false).data(1, "hello", false).headers(1, trailers, trailersBlock, true).bytes())
	f.Add(newFrames().raw(clientPreface).settings().headers(1, post, requestBlock, false).data(1, "body", false).rst(1).window(0, 100).bytes(),
		newFrames().settings().bytes())
	f.Add(newFrames().raw(clientPreface).settings().headers(3, get, requestBlock, false).data(3, "x", false).data(3, "y", true).headers(1, get, requestBlock, true).bytes(),
		newFrames().settings().window(1, 5).data(1, "zz", true).rst(7).bytes())
	f.Add([]byte(clientPreface+"\x00\x00\x00\x04\x00\x00\x00\x00\x00\x00\x00\x04\x01\x00\x00\x00\x01\x82\x86\x84"), []byte{})
	f.Fuzz(func(t *testing.T, down, up []byte) {
		if !bytes.HasPrefix(down, []byte(clientPreface)) {
			down = append([]byte(clientPreface), down...)
		}
		uc, err := NewClientConn(newFuzzConn(up), Config{})
		if err != nil {
			t.Fatal(err)
		}
		upDone := make(chan struct{})
		go func() { defer close(upDone); _ = uc.Run() }()
		sc := NewServerConn(newFuzzConn(down), Config{}, fuzzHandler{uc})
		_ = sc.Serve()
		uc.Close()
		select {
		case <-upDone:
		case <-time.After(10 * time.Second):
			t.Fatal("the client connection did not end")
		}
		select {
		case <-sc.Done():
		default:
			t.Fatal("Serve returned before the connection was done")
		}
	})
}
