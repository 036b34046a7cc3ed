package h1

import (
	"bufio"
	"io"
	"net"
	"testing"
	"time"

	"github.com/meridian-mesh/meridian/internal/testutil"
)

func newTestWatch(t *testing.T) (*Watch, *bufio.Reader, net.Conn, chan struct{}) {
	t.Helper()
	p, c := testutil.TCPPair(t)
	br := bufio.NewReader(p)
	gone := make(chan struct{}, 1)
	w := NewWatch(p, br, func() { gone <- struct{}{} })
	t.Cleanup(w.Stop)
	return w, br, c, gone
}

// TestWatchClientGone: a client that closes its connection while armed is reported, once
// the head has taken longer than WatchDelay.
func TestWatchClientGone(t *testing.T) {
	w, _, c, gone := newTestWatch(t)
	w.Arm()
	_ = c.Close()
	select {
	case <-gone:
	case <-time.After(WatchDelay + 10*time.Second):
		t.Fatal("the client's close was not noticed")
	}
	if !w.Disarm() {
		t.Error("Disarm: the client is reported still there")
	}
}

// TestWatchClientStays: a client that stays, and one that sends its next request while the
// watcher reads, are not reported; what the watcher read stays in the reader, and the
// connection reads normally afterwards (no deadline left behind).
func TestWatchClientStays(t *testing.T) {
	w, br, c, gone := newTestWatch(t)
	w.Arm()
	if w.Disarm() {
		t.Error("an immediate Disarm reports the client gone")
	}

	w.Arm()
	time.Sleep(WatchDelay + 200*time.Millisecond) // the watcher is reading
	if w.Disarm() {
		t.Error("a client that stayed is reported gone")
	}
	if _, err := io.WriteString(c, "GET /next HTTP/1.1\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	var h Head
	if err := ReadHead(br, &h, 1024); err != nil || string(h.Raw) != "GET /next HTTP/1.1\r\n\r\n" {
		t.Fatalf("after Disarm: %q %v", h.Raw, err)
	}

	w.Arm()
	time.Sleep(WatchDelay + 200*time.Millisecond)
	if _, err := io.WriteString(c, "GET /pipelined HTTP/1.1\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if w.Disarm() {
		t.Error("a client that sent its next request is reported gone")
	}
	if err := ReadHead(br, &h, 1024); err != nil || string(h.Raw) != "GET /pipelined HTTP/1.1\r\n\r\n" {
		t.Fatalf("the pipelined request: %q %v", h.Raw, err)
	}
	select {
	case <-gone:
		t.Error("gone was called")
	default:
	}
}
