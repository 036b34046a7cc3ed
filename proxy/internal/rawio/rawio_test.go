//go:build linux

package rawio

import (
	"bytes"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/meridian-mesh/meridian/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.Main(m, nil)) }

// pair returns both ends of a loopback TCP connection, wrapped.
func pair(t *testing.T) (accepted, dialled *Conn) {
	t.Helper()
	a, d := testutil.TCPPair(t)
	return Wrap(a).(*Conn), Wrap(d).(*Conn)
}

// TestRoundTrip: 8 MiB each way, more than the sockets buffer, so both Write's wait for
// writability and Read's wait for readability run, with the other side reading and writing
// through the same kind of Conn.
func TestRoundTrip(t *testing.T) {
	a, d := pair(t)
	want := make([]byte, 8<<20)
	_, _ = rand.Read(want)
	done := make(chan error, 1)
	go func() { // echoes what a reads until d's end of stream
		_, err := io.Copy(struct{ io.Writer }{a}, struct{ io.Reader }{a}) // through Read and Write
		if err == nil {
			err = a.CloseWrite()
		}
		done <- err
	}()
	got := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(struct{ io.Reader }{d})
		got <- b
	}()
	_ = d.SetWriteDeadline(time.Now().Add(testutil.StopWithin))
	if n, err := d.Write(want); n != len(want) || err != nil {
		t.Fatalf("Write = %d, %v; want %d, nil", n, err, len(want))
	}
	if err := d.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	if err := testutil.Recv(t, done, testutil.StopWithin, "the echo"); err != nil {
		t.Fatalf("echo: %v", err)
	}
	if b := testutil.Recv(t, got, testutil.StopWithin, "the echoed bytes"); !bytes.Equal(b, want) {
		t.Fatalf("read back %d bytes, not the %d written", len(b), len(want))
	}
}

// TestReadErrors: a deadline, a close of the reader's own end and the peer's end of stream
// give the errors net.Conn's Read gives.
func TestReadErrors(t *testing.T) {
	a, d := pair(t)
	buf := make([]byte, 16)
	if n, err := a.Read(buf[:0]); n != 0 || err != nil {
		t.Errorf("empty Read = %d, %v", n, err)
	}
	_ = a.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	_, err := a.Read(buf)
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("Read past its deadline: %v, want a timeout", err)
	}
	_ = a.SetReadDeadline(time.Time{})
	if _, err := d.Write([]byte("hi")); err != nil {
		t.Fatal(err)
	}
	if n, err := a.Read(buf); n != 2 || err != nil || string(buf[:n]) != "hi" {
		t.Errorf("Read = %d %q, %v", n, buf[:n], err)
	}
	_ = d.Close()
	if n, err := a.Read(buf); n != 0 || err != io.EOF {
		t.Errorf("Read after the peer closed = %d, %v; want io.EOF", n, err)
	}
	res := make(chan error, 1)
	a2, _ := pair(t)
	go func() {
		_, err := a2.Read(buf)
		res <- err
	}()
	time.Sleep(10 * time.Millisecond) // let the Read wait in the poller (either way the error is the same)
	_ = a2.Close()
	if err := testutil.Recv(t, res, testutil.StopWithin, "the Read of a closed connection"); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Read of a closed connection: %v, want net.ErrClosed", err)
	}
}

// TestWriteErrors: a write to a peer that reset the connection fails with the kernel's error,
// and one past its deadline (the peer reads nothing) with a timeout, having written part.
func TestWriteErrors(t *testing.T) {
	a, d := pair(t)
	_ = d.SetLinger(0)
	_ = d.Close() // a reset
	var err error
	for i := 0; i < 100 && err == nil; i++ { // the first write may land before the RST is seen
		_, err = a.Write([]byte("x"))
		time.Sleep(time.Millisecond)
	}
	if !errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, syscall.EPIPE) {
		t.Errorf("Write to a reset connection: %v, want ECONNRESET or EPIPE", err)
	}
	a2, _ := pair(t)
	// A second: enough for the Write to start and fill the sockets' buffers on a loaded
	// machine, so that part of it was written when the deadline passes.
	_ = a2.SetWriteDeadline(time.Now().Add(time.Second))
	n, err := a2.Write(make([]byte, 64<<20))
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() || n <= 0 || n >= 64<<20 {
		t.Errorf("Write past its deadline = %d, %v; want part of it and a timeout", n, err)
	}
}

// TestTLSOverRawConns: crypto/tls runs over Conns (as the proxy's mTLS does), and what wraps
// a Conn still reaches the *net.TCPConn through NetConn.
func TestTLSOverRawConns(t *testing.T) {
	a, d := pair(t)
	srv := tlsEcho(t, a, d, func(*tls.Conn) {})
	if _, ok := srv.NetConn().(*Conn).NetConn().(*net.TCPConn); !ok {
		t.Error("NetConn does not return the *net.TCPConn")
	}
}

// TestOrdinary: Ordinary finds the Conn under a TLS connection and switches it, and only it,
// to ordinary calls; TLS then runs over it both ways as before. What has no Conn under it
// is reported.
func TestOrdinary(t *testing.T) {
	p, q := net.Pipe()
	defer p.Close()
	defer q.Close()
	if Ordinary(p) {
		t.Error("Ordinary found a Conn under a net.Pipe")
	}
	a, d := pair(t)
	tlsEcho(t, a, d, func(cli *tls.Conn) {
		if !Ordinary(cli) {
			t.Fatal("Ordinary did not find the Conn under a *tls.Conn")
		}
		if !d.ordinary.Load() || a.ordinary.Load() {
			t.Fatalf("ordinary: dialled %v, accepted %v; want true, false", d.ordinary.Load(), a.ordinary.Load())
		}
	})
}

// tlsEcho runs TLS 1.3 over a (server) and d (client), calls before with the client's
// connection, then has the server echo 180 kB (more than a record) back to the client, and
// returns the server's connection.
func tlsEcho(t *testing.T, a, d *Conn, before func(cli *tls.Conn)) *tls.Conn {
	t.Helper()
	pki := testutil.NewPKI(t)
	srv := tls.Server(a, &tls.Config{Certificates: []tls.Certificate{*pki.Leaf(t, "server.test")}, MinVersion: tls.VersionTLS13})
	cli := tls.Client(d, &tls.Config{ServerName: "server.test", RootCAs: pki.Roots, MinVersion: tls.VersionTLS13})
	before(cli)
	done := make(chan error, 1)
	go func() {
		_, err := io.Copy(srv, srv)
		_ = srv.Close()
		done <- err
	}()
	msg := bytes.Repeat([]byte("meridian "), 20000)
	go func() { _, _ = cli.Write(msg) }()
	got := make([]byte, len(msg))
	_ = cli.SetReadDeadline(time.Now().Add(testutil.StopWithin))
	if _, err := io.ReadFull(cli, got); err != nil || !bytes.Equal(got, msg) {
		t.Fatalf("echo over TLS: %v", err)
	}
	_ = cli.Close()
	if err := testutil.Recv(t, done, testutil.StopWithin, "the TLS echo"); err != nil {
		t.Errorf("TLS echo: %v", err)
	}
	return srv
}

// TestWrapOther: what is not a *net.TCPConn is returned as it is.
func TestWrapOther(t *testing.T) {
	p, q := net.Pipe()
	defer p.Close()
	defer q.Close()
	if Wrap(p) != p {
		t.Error("Wrap changed a net.Pipe")
	}
}

// TestNoAllocs: a Read and a Write allocate nothing.
func TestNoAllocs(t *testing.T) {
	a, d := pair(t)
	out, in := []byte("ping"), make([]byte, 4)
	allocs := testing.AllocsPerRun(200, func() {
		if _, err := d.Write(out); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(a, in); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations per Write and Read", allocs)
	}
}

// TestEmptyReadWriteReportState: an empty Read or Write of a closed connection fails as
// net.Conn's do, rather than reporting success.
func TestEmptyReadWriteReportState(t *testing.T) {
	a, _ := pair(t)
	_ = a.Close()
	if _, err := a.Read(nil); !errors.Is(err, net.ErrClosed) {
		t.Errorf("empty Read of a closed connection: %v, want net.ErrClosed", err)
	}
	if _, err := a.Write(nil); !errors.Is(err, net.ErrClosed) {
		t.Errorf("empty Write of a closed connection: %v, want net.ErrClosed", err)
	}
	if f, err := a.File(); f != nil || err == nil {
		t.Errorf("File = %v, %v; want an error (it would make the socket blocking)", f, err)
	}
}

// TestSocketOrdersMemory: what a goroutine wrote before sending a byte is seen by the one that
// received it, and the race detector (go test -race) knows it, as it does for net.Conn: a
// write to x, a byte through the connection, then a read of x, is not a race.
func TestSocketOrdersMemory(t *testing.T) {
	a, d := pair(t)
	x := 0
	sent := make(chan error, 1)
	go func() {
		x = 1
		_, err := d.Write([]byte{1})
		sent <- err
	}()
	if _, err := io.ReadFull(a, make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	if x != 1 {
		t.Errorf("x = %d after the byte arrived", x)
	}
	if err := testutil.Recv(t, sent, testutil.StopWithin, "the write"); err != nil {
		t.Fatal(err)
	}
}
