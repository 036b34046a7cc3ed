package rawio

import (
	"bytes"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/meridian-mesh/meridian/internal/testutil"
)

const wait = 10 * time.Second

// pair returns a wrapped accepted loopback connection and the plain *net.TCPConn that
// dialled it, with deadlines 10 s away; both are closed when t ends.
func pair(t *testing.T) (*Conn, *net.TCPConn) {
	t.Helper()
	a, peer := testutil.TCPPair(t)
	w, ok := Wrap(a).(*Conn)
	if !ok {
		t.Fatalf("Wrap(%T) is not a *Conn", a)
	}
	_ = w.SetDeadline(time.Now().Add(wait))
	_ = peer.SetDeadline(time.Now().Add(wait))
	return w, peer
}

// TestRoundTrip: 8 MiB each way at once (more than the sockets buffer, so both sides wait for
// room and for data), and the peer's end of stream as io.EOF after the data.
func TestRoundTrip(t *testing.T) {
	c, peer := pair(t)
	data := make([]byte, 8<<20)
	_, _ = rand.Read(data)
	errs := make(chan error, 2)
	go func() { // the peer echoes everything back, then half-closes
		_, err := io.Copy(peer, peer)
		if err == nil {
			err = peer.CloseWrite()
		}
		errs <- err
	}()
	go func() {
		_, err := c.Write(data)
		if err == nil {
			err = c.CloseWrite()
		}
		errs <- err
	}()
	got, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("ReadAll: %v", err)
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("read %d bytes back, not the %d written", len(got), len(data))
	}
	if n, err := c.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Errorf("after the end: %d, %v; want io.EOF", n, err)
	}
}

// TestErrors: a passed deadline, a reset and a closed connection give the net package's
// errors.
func TestErrors(t *testing.T) {
	c, peer := pair(t)
	_ = c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	_, err := c.Read(make([]byte, 1))
	var ne net.Error
	if !errors.Is(err, os.ErrDeadlineExceeded) || !errors.As(err, &ne) || !ne.Timeout() {
		t.Errorf("a passed deadline: %v", err)
	}
	_ = c.SetReadDeadline(time.Now().Add(wait))
	if _, err := peer.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if n, err := c.Read(make([]byte, 4)); n != 1 || err != nil {
		t.Errorf("after the deadline moved: %d, %v", n, err)
	}

	_ = peer.SetLinger(0)
	_ = peer.Close()
	_, err = c.Read(make([]byte, 1))
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("a reset: %v, want ECONNRESET", err)
	}

	_ = c.Close()
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Read after Close: %v, want net.ErrClosed", err)
	}
	if _, err := c.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Write after Close: %v, want net.ErrClosed", err)
	}
}

// TestCloseWakesRead: closing the connection ends a Read waiting on it.
func TestCloseWakesRead(t *testing.T) {
	c, _ := pair(t)
	done := make(chan error, 1)
	go func() {
		_, err := c.Read(make([]byte, 1))
		done <- err
	}()
	time.Sleep(50 * time.Millisecond) // let it wait (a Close before the Read is the other test)
	_ = c.Close()
	select {
	case err := <-done:
		if !errors.Is(err, net.ErrClosed) {
			t.Errorf("the waiting Read: %v, want net.ErrClosed", err)
		}
	case <-time.After(wait):
		t.Fatal("Close did not end the waiting Read")
	}
}

// TestNoAllocations: a Read and a Write that succeed allocate nothing.
func TestNoAllocations(t *testing.T) {
	c, peer := pair(t)
	msg, buf := []byte("ping"), make([]byte, 4)
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := c.Write(msg); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(peer, buf); err != nil {
			t.Fatal(err)
		}
		if _, err := peer.Write(msg); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c, buf); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations per Write and Read", allocs)
	}
}

// TestWrapOthers: what is not a *net.TCPConn is returned as it is; NetConn unwraps.
func TestWrapOthers(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if Wrap(a) != a {
		t.Error("a pipe was wrapped")
	}
	c, _ := pair(t)
	if _, ok := c.NetConn().(*net.TCPConn); !ok {
		t.Errorf("NetConn is a %T", c.NetConn())
	}
}

// TestConcurrentWrites: writes from several goroutines at once each arrive whole (as on a
// *net.TCPConn, whose writes the runtime serializes).
func TestConcurrentWrites(t *testing.T) {
	c, peer := pair(t)
	const writers, size = 8, 64 << 10
	errs := make(chan error, writers)
	for i := range writers {
		go func() {
			_, err := c.Write(bytes.Repeat([]byte{byte('a' + i)}, size))
			errs <- err
		}()
	}
	got := make([]byte, writers*size)
	if _, err := io.ReadFull(peer, got); err != nil {
		t.Fatal(err)
	}
	for range writers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for off := 0; off < len(got); off += size { // each write is one run of its byte
		if chunk := got[off : off+size]; !bytes.Equal(chunk, bytes.Repeat(chunk[:1], size)) {
			t.Fatalf("the write at %d is interleaved with another", off)
		}
	}
}
