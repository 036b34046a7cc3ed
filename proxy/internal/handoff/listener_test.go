package handoff

import (
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"github.com/meridian-mesh/meridian/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.Main(m, nil)) }

// TestHandoff: a connection handed off is what Accept returns; after Close, Accept returns
// net.ErrClosed and Handoff refuses (returns false) without blocking.
func TestHandoff(t *testing.T) {
	addr := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 4143}
	l := New(addr)
	if l.Addr() != addr {
		t.Errorf("Addr = %v", l.Addr())
	}
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			t.Error(err)
		}
		accepted <- c
	}()
	if !l.Handoff(a) {
		t.Fatal("Handoff refused before Close")
	}
	if c := testutil.Recv(t, accepted, 10*time.Second, "the accepted connection"); c != a {
		t.Errorf("Accept returned %v, want the connection handed off", c)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	_ = l.Close() // twice is fine
	if _, err := l.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Accept after Close: %v", err)
	}
	if l.Handoff(b) {
		t.Error("Handoff accepted after Close")
	}
}
