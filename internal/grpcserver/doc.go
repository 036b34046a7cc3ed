// Package grpcserver builds the gRPC servers of Meridian's processes with the standard
// grpc_server_* Prometheus metrics (go-grpc-middleware's provider) and serves them, on one or
// more listeners, until a context ends or a listener fails, stopping gracefully within a
// bound that a connection stalled in its handshake does not stretch.
//
// It imports grpc, Prometheus and the middleware provider only; it must not import
// `github.com/meridian-mesh/meridian/...`.
package grpcserver
