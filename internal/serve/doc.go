// Package serve is the process around a server component, the same for every Meridian server
// command: a metrics registry (with the Go and process collectors), the components in one
// run.Group, an optional gRPC server (with the grpc_server_* metrics, the transport
// credentials it is given — the control plane's mTLS — and optionally the same API in
// plaintext on a loopback-only listener for tools), and the admin endpoints, whose /ready is
// the group's readiness and lists its warnings (and /debug/pprof/ only when Process.Pprof is
// set: the commands' --enable-pprof). cmd/meridian runs every server subcommand through it,
// and tests run components through it exactly as the commands do.
//
// It owns the listeners and the servers it starts. It imports internal/run, internal/admin,
// internal/grpcserver, grpc, Prometheus and zap; it must not import a component package:
// `shard/...`, `policy/...`, `identity/...`, `injector/...`, `proxy/...`, `bench/...`,
// `cmd/...`.
package serve
