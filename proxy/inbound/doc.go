// Package inbound is the proxy's inbound side: the listener (4143) in front of the pod's
// application. Per connection it
//
//   - a redirected connection to a port that is opaque (Config.OpaquePorts, or its Server's
//     policy) is proxied as TCP without reading first: its application may speak first;
//   - otherwise peeks at the first bytes: a TLS ClientHello naming this proxy's identity is
//     terminated with tlsid (ALPN transport.l5d.io/v1, h2, http/1.1) and the client's
//     verified identity recorded; TLS for another name, or for none, is the application's
//     and passes through untouched; anything else is plaintext;
//   - with ALPN transport.l5d.io/v1 reads Linkerd's transport header (10 s bound): the target
//     port and the session protocol (HTTP/1, HTTP/2 or opaque), from a client with an
//     identity only (linkerd2-proxy's "direct connections must be mutually authenticated");
//     without it the target port is the original destination's (SO_ORIGINAL_DST, package
//     origdst) or Config.DefaultPort;
//   - looks up the port's inbound policy (package inbound/policy: WatchPort on the policy
//     service, last-good or default fallback) and decides the protocol: the header's, else
//     opaque for Config.OpaquePorts and opaque/TLS policies, HTTP for HTTP policies, else
//     protocol detection (proxy/detect);
//   - for TCP, authorizes the connection (denied: closed; a policy change that no longer
//     allows it closes it too) and copies bytes both ways to the application, half-close
//     aware;
//   - for HTTP, serves the connection and authorizes each request against the best-matching
//     route: not authorized is 403 (gRPC: PERMISSION_DENIED), after which an HTTP/1 client
//     is disconnected (Connection: close), and an HTTP/1 connection idle between requests or
//     an HTTP/2 connection without a stream closes after Config.IdleTimeout, so that no
//     client holds MaxConns' slots it does not use; no route is 404; a refused request is
//     counted without its authority (refusedRoute), which its client chose; an authorized
//     request has any l5d-client-id the client sent removed, gets l5d-client-id set to the
//     identity the client proved, and goes to the application over pooled connections
//     (HTTP/1.1 keep-alive, or h2c for HTTP/2). HTTP/1.1 starts on the lean path (h1conn.go,
//     on the codec of proxy/h1: heads parsed in place, nothing allocated per request); a
//     request it does not take exactly (an upgrade, Expect, a chunked or large body,
//     HTTP/1.0, gRPC, an escaped path, ...) is handed with the rest of its connection to
//     net/http's server. HTTP/2 (a transport header saying so, or detected) is served on
//     the lean relay of proxy/h2 (h2conn.go): each stream is authorized alike and relayed
//     frame by frame to a multiplexed h2c connection to the application; a request a
//     Linkerd client proxy upgraded from HTTP/1 (l5d-orig-proto) goes to the net/http
//     handler through the stream's adapter, which downgrades it.
//
// An h2c upgrade is forwarded as a plain request without its upgrade headers, as
// linkerd2-proxy does: the HTTP/2 requests after the switch would escape per-request
// authorization. Other upgrades (WebSocket) are authorized as their request and then relayed
// as bytes.
//
// The application is at Config.AppAddr(port) when set, by default the original
// destination's address, else the address the client connected to (the pod's: a transport
// header never reaches what the pod serves on loopback only). Metrics are linkerd2-proxy's (package
// proxy/metrics): request/response and TCP families with direction="inbound", and the
// inbound_{http,tcp}_authz_{allow,deny}_total counters.
//
// Run owns the listener, every connection and the policy streams. When its context ends it
// stops accepting, lets in-flight requests and connections finish for Config.Grace, then
// closes what is left and returns.
//
// It imports the proxy's building blocks (detect, h1, h2, transportheader, tlsid, metrics,
// origdst, inbound/policy, internal/accept, internal/handoff, internal/rawio, internal/run),
// grpc, hpack and zap. It must
// not import `shard/...`, `policy/...`, `identity`, `injector/...`, `bench/...` or `cmd/...`.
package inbound
