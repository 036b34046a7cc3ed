package origdst

import (
	"errors"
	"net"
	"os"
	"runtime"
	"testing"

	"github.com/meridian-mesh/meridian/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.Main(m, nil)) }

// accept dials lis from dial and returns the server side of the connection.
func accept(t *testing.T, lis net.Listener, dial func() (net.Conn, error)) (server, client net.Conn) {
	t.Helper()
	type res struct {
		c   net.Conn
		err error
	}
	got := make(chan res, 1)
	go func() { c, err := lis.Accept(); got <- res{c, err} }()
	client, err := dial()
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { _ = client.Close() })
	r := testutil.Recv(t, got, testutil.StopWithin, "the accepted connection")
	if r.err != nil {
		t.Fatalf("accept: %v", r.err)
	}
	t.Cleanup(func() { _ = r.c.Close() })
	return r.c, client
}

func TestNotRedirected(t *testing.T) {
	lis := testutil.Listen(t)
	server, _ := accept(t, lis, func() (net.Conn, error) { return net.Dial("tcp", lis.Addr().String()) })
	want := ErrNotRedirected
	if runtime.GOOS != "linux" {
		want = ErrUnsupported
	}
	if _, err := OriginalDst(server); !errors.Is(err, want) {
		t.Fatalf("OriginalDst of a direct connection: %v, want %v", err, want)
	}
	// Through a wrapper that exposes the socket, the same answer.
	if _, err := OriginalDst(wrapped{server}); !errors.Is(err, want) {
		t.Fatalf("OriginalDst through NetConn: %v, want %v", err, want)
	}
}

type wrapped struct{ net.Conn }

func (w wrapped) NetConn() net.Conn { return w.Conn }

func TestUnsupportedConn(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if _, err := OriginalDst(a); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("OriginalDst(pipe) = %v, want ErrUnsupported", err)
	}
}
