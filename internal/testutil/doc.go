// Package testutil holds what Meridian's tests share: Eventually, EventuallyEvery,
// EventuallyNoError and Never (a condition polled until a deadline, or over a window), Recv
// and Wait (a receive or a blocking call with a deadline), Go (a goroutine owned by the test:
// cancelled and waited for when it ends), Main and VerifyNone (goroutine-leak checks) and
// loopback servers and clients (Listen, ServeConns, ServeGRPC, DialGRPC, and WantStatus for a
// call's gRPC status), and a mesh PKI shaped like a Linkerd install (NewPKI: a trust anchor,
// an issuer, leaf certificates for identities; StaticCert serves one to TLS), metrics read
// from a prometheus.Gatherer (Gathered, HistogramSamples), the check of an InvalidArgument
// that quotes a bad input briefly (WantQuotedInvalid), building the meridian binary
// (BuildMeridian, GoBuildMeridian), network namespaces for the tests that need them
// (NewNetns, LinkNetns, RunCmd), a kubeconfig file for a server (WriteKubeconfig), a
// gzip file's length (GunzipLen), a child process's output, end and state (Buffer,
// KilledBy, Running, ProcStat), a test binary that acts as a child process (ChildMain,
// ChildEnv, ChildArgs), and a TestMain that lets memberlist's goroutines settle before the
// leak check (RunThenSettle).
//
// It is test-only: nothing outside _test.go files may import it. It imports grpc, goleak,
// prometheus's client and the standard library; it must not import any other Meridian package
// (`github.com/meridian-mesh/meridian/...`), so that every package can use it.
package testutil
