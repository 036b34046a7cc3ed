// Package h2 is the proxy's lean HTTP/2 relay, shared by the outbound and the inbound side
// for HTTP/2 with prior knowledge (gRPC): a server connection that takes a client's
// requests and hands each to a Handler, client connections to upstreams (pooled per
// upstream, multiplexed), and the relay of a request's stream to an upstream stream frame
// by frame, both ways, from the two connections' read loops.
//
// One goroutine reads each connection (the caller of Serve or Run) and does the work a
// frame causes: a frame read on one side is written on the other at once, and the writes
// one read produced are flushed together before the loop waits again. There is no goroutine
// per stream or per write, header blocks are decoded and re-encoded with HPACK without
// building maps, and bodies pass between the connections' buffers; a relayed request
// allocates a few objects (its streams), not the hundred of net/http's server and Transport.
//
// Flow control is end to end through the proxy: a stream's window is given back to its
// sender only as the proxy passes the bytes on, so the proxy buffers at most a stream's
// window (Config.StreamWindow) per stream and a connection's (Config.ConnWindow) per
// connection for a peer that reads slower than the other sends. A write blocked for
// Config.WriteTimeout fails its connection.
//
// It checks what HTTP/2 requires of frames and fields (RFC 9113): frame sizes and stream
// states, SETTINGS, flow-control windows, HPACK, pseudo-header fields, lowercase names,
// values without control characters, no connection-specific fields, content-length
// against the body; a connection error ends the connection with GOAWAY, a stream error
// resets the stream. It does not push, does not prioritize, and relays extended CONNECT
// only if the handler does. Its frame parsing is fuzzed.
//
// It imports golang.org/x/net/http2/hpack and the standard library; it must not import any
// other Meridian package: `github.com/meridian-mesh/meridian/...`.
//
// Allowed imports: `std`, `golang.org/x/net/http2/hpack`.
package h2
