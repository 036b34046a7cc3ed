// Package grpcserver builds the gRPC servers of Meridian's processes with the standard
// grpc_server_* Prometheus metrics (go-grpc-middleware's provider) and serves them until a
// context ends, stopping gracefully within a bound.
//
// It imports grpc, Prometheus and the middleware provider only; it must not import
// `github.com/meridian-mesh/meridian/...`.
package grpcserver
