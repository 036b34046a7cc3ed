package discovery

import (
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
)

// TestPoolClosesIdleConnections: a connection no stream has used for PoolIdleTimeout is
// closed and forgotten by the next Conn or release (a proxy redirected to ever new replica
// addresses keeps a bounded pool); one in use is kept however long; a release counts once.
func TestPoolClosesIdleConnections(t *testing.T) {
	p := NewPool(grpc.WithTransportCredentials(insecure.NewCredentials()))
	t.Cleanup(func() { _ = p.Close() })
	now := time.Unix(1_000_000, 0)
	p.now = func() time.Time { return now }

	a, releaseA, err := p.Conn("127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	_, releaseB, err := p.Conn("127.0.0.1:2")
	if err != nil {
		t.Fatal(err)
	}
	_, releaseA2, err := p.Conn("127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	releaseA()
	releaseA() // counted once: A still has a user
	now = now.Add(2 * PoolIdleTimeout)
	if _, release, err := p.Conn("127.0.0.1:3"); err != nil {
		t.Fatal(err)
	} else {
		release()
	}
	if n := p.size(); n != 3 {
		t.Fatalf("%d connections after the clock moved with every one in use or just released, want 3", n)
	}
	releaseA2()
	now = now.Add(PoolIdleTimeout + time.Second)
	if _, release, err := p.Conn("127.0.0.1:2"); err != nil { // B: a second user
		t.Fatal(err)
	} else {
		release()
	}
	if n := p.size(); n != 1 {
		t.Errorf("%d connections, want 1: A and C idle for longer than PoolIdleTimeout, B in use", n)
	}
	if s := a.(*grpc.ClientConn).GetState(); s != connectivity.Shutdown {
		t.Errorf("the idle connection's state is %v, want Shutdown", s)
	}
	releaseB()
	now = now.Add(PoolIdleTimeout + time.Second)
	if _, release, err := p.Conn("127.0.0.1:1"); err != nil {
		t.Fatal(err)
	} else {
		release()
	}
	if n := p.size(); n != 1 {
		t.Errorf("%d connections, want 1 (A dialled again; B idle too long)", n)
	}
}
