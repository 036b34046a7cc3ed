// Package testutil holds what Meridian's tests share: Eventually (a condition polled until a
// deadline), Main (a TestMain that fails the binary when goroutines leak) and loopback gRPC
// servers and clients (ServeGRPC, DialGRPC).
//
// It is test-only: nothing outside _test.go files may import it. It imports grpc, goleak and
// the standard library; it must not import any other Meridian package
// (`github.com/meridian-mesh/meridian/...`), so that every package can use it.
package testutil
