package testutil

import (
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// ServeGRPC starts a gRPC server on 127.0.0.1 (a free port), lets register add its services,
// and stops it when t ends (gracefully, cut after 5 s). It returns the server's address.
func ServeGRPC(t testing.TB, register func(*grpc.Server), opts ...grpc.ServerOption) string {
	t.Helper()
	lis := Listen(t)
	srv := grpc.NewServer(opts...)
	register(srv)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(lis)
	}()
	t.Cleanup(func() {
		stopped := make(chan struct{})
		go func() { srv.GracefulStop(); close(stopped) }()
		select {
		case <-stopped:
		case <-time.After(5 * time.Second):
			srv.Stop()
			<-stopped
		}
		<-done
	})
	return lis.Addr().String()
}

// Listen returns a TCP listener on 127.0.0.1 on a free port, closed when t ends.
func Listen(t testing.TB) net.Listener {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen on loopback: %v", err)
	}
	t.Cleanup(func() { _ = lis.Close() })
	return lis
}

// TCPPair returns both ends of a loopback TCP connection: the accepted one (as a server holds
// it) and the dialled one; both are closed when t ends.
func TCPPair(t testing.TB) (accepted, dialled *net.TCPConn) {
	t.Helper()
	lis := Listen(t)
	got := make(chan net.Conn, 1)
	go func() { // ends with the Accept: the dial below makes it return, or the listener's close
		c, _ := lis.Accept()
		got <- c
	}()
	d, err := net.DialTimeout("tcp", lis.Addr().String(), 10*time.Second)
	if err != nil {
		t.Fatalf("dial loopback: %v", err)
	}
	a := Recv(t, got, 10*time.Second, "the loopback connection to be accepted")
	if a == nil {
		_ = d.Close()
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { _ = a.Close(); _ = d.Close() })
	return a.(*net.TCPConn), d.(*net.TCPConn)
}

// DialGRPC returns a plaintext client connection to addr, closed when t ends.
func DialGRPC(t testing.TB, addr string, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	opts = append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)
	conn, err := grpc.NewClient(addr, opts...)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// WantStatus fails t (Fatalf) unless err carries the gRPC status code (codes.OK for a nil
// err) with a message containing msg ("" matches any).
func WantStatus(t testing.TB, err error, code codes.Code, msg string) {
	t.Helper()
	if st := status.Convert(err); st.Code() != code || !strings.Contains(st.Message(), msg) {
		t.Fatalf("got %v %q, want %v containing %q", st.Code(), st.Message(), code, msg)
	}
}
