// Package policy is the inbound proxy's view of Linkerd's inbound policy: the compiled form
// of an io.linkerd.proxy.inbound.Server (Compile), its evaluation for a connection and for
// an HTTP or gRPC request, the default policies of LINKERD2_PROXY_INBOUND_DEFAULT_POLICY
// (Default), and the client that streams each port's policy from the policy service
// (Watcher: one WatchPort stream per port in use).
//
// Evaluation follows linkerd2-proxy (linkerd/proxy/server-policy and the inbound policy
// stack):
//
//   - A connection is authorized by the first authorization whose networks contain the
//     client's address (and none of the network's exceptions) and whose authentication the
//     client meets: unauthenticated (anyone), mesh TLS without identity (any connection the
//     proxy terminated), or mesh TLS from one of the listed identities or identity suffixes
//     (a suffix ".a.b" matches "x.a.b"; the empty suffix matches every identity). Traffic
//     from localhost (127.0.0.1, ::1) is always authorized on a policy from the service, as
//     linkerd2-proxy does.
//   - An HTTP request is matched to the most specific route (host, then path: exact, then
//     the longest prefix, then regex; then method, header and query matches), and authorized
//     by that route's own authorizations followed by the server's. A policy without routes
//     gets one default route. No route: 404. A rule with filters answers 500, as Linkerd
//     answers a filter it does not know (Meridian's policy controller sends none).
//   - gRPC routes match the :path /service/method and headers.
//
// A Server is immutable once built and shared by pointer; evaluation takes no lock and does
// not allocate. The Watcher owns the stream goroutines (Run); a Port's policy is read with
// one atomic load. While the service is unreachable a port keeps the last policy it
// received, or the default policy if it received none; a policy that does not compile is
// ignored (the last good one stays), and a port that never received a good one denies.
//
// Allowed imports: `std`, `github.com/linkerd/linkerd2-proxy-api/go/...`,
// `google.golang.org/grpc/...`, `google.golang.org/protobuf/...`, `go.uber.org/zap`.
// It must not import `github.com/meridian-mesh/meridian/...`.
package policy
