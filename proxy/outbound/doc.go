// Package outbound is the proxy's outbound side: the listener (127.0.0.1:4140) that the
// pod's own applications send their traffic to, and everything between it and the endpoints
// of the services they call.
//
// # Two ways in
//
// A connection arrives either transparently, redirected by proxy-init's iptables rules (its
// original destination, SO_ORIGINAL_DST, is the address the application dialled), or
// explicitly: the application uses the listener as an HTTP proxy (`curl -x
// http://127.0.0.1:4140 http://web.shop.svc.cluster.local:8080/`, or CONNECT host:port for any
// TCP protocol). A connection is explicit when its original destination is the listener
// itself or cannot be read (no iptables); its requests are classified by proxy/httpproxy.
//
// # Per connection
//
// A transparent connection to a port in Config.OpaquePorts, or to a target whose profile
// says opaque (or whose single endpoint is hinted opaque), is proxied as TCP at once;
// otherwise proxy/detect decides within Config.DetectTimeout (10 s) between HTTP/1, HTTP/2
// and opaque TCP (the answer on timeout); an explicit connection is detected the same way.
// Each request is routed on its own: to the explicit-proxy target, or for transparent traffic
// to the Host (:authority) when it is a cluster name (Config.ClusterSuffixes) and else to
// the original destination.
//
// # HTTP
//
// HTTP/1.1 connections start on the lean path (h1conn.go, on the codec of proxy/h1): heads
// parsed in place, bodies relayed between bufio buffers, upstream connections pooled per
// endpoint; a proxied request allocates nothing there. A request it does not take exactly
// (CONNECT, an upgrade, Expect, a chunked or large body, HTTP/1.0, gRPC, anything its strict
// parser refuses) is handed, with the rest of its connection and every byte read, to one
// net/http server, which forwards through net/http Transports. HTTP/2 with prior knowledge
// (gRPC) is served on the lean relay of proxy/h2 (h2conn.go): each stream is routed,
// balanced and relayed frame by frame to a multiplexed HTTP/2 connection of its endpoint,
// from the two connections' read loops; a request it does not take (CONNECT, no authority)
// goes to the same handler as net/http's through the stream's net/http adapter. Every path
// routes, balances, retries and counts alike; the parsers are fuzzed against net/http's.
//
// # Targets
//
// Each target authority is resolved once through Resolver (proxy/discovery in production)
// and kept while it is used and for Config.IdleTimeout after; its Snapshot keeps two
// balancers current (proxy/balance): power of two choices over peak-EWMA for HTTP requests,
// least connections for TCP. A target with no endpoints fails at once: 503 for HTTP (gRPC:
// UNAVAILABLE), a reset connection for TCP (503 to a CONNECT). A name discovery refuses
// (discovery.ErrNotMeshName) is resolved by the address DNS gives it, as the original
// destination is (a meshed pod's address is then reached over mTLS); a name DNS does not know
// either, or an address discovery refuses, goes to the original address unproxied. A
// connection that reaches the outbound listener itself is refused (it would loop). A transparent
// connection's original destination is an IP address: discovery resolves it by its profile
// (a pod's endpoint, with its identity; a cluster IP's Service), so it is balanced and mTLS
// like a name. A connection error on
// an endpoint (dial, TLS handshake, transport header: nothing of the request was sent) is
// retried once on another endpoint; nothing is retried after that.
//
// # Endpoints
//
// Each endpoint has its own connection pools: keep-alive HTTP/1.1 and multiplexed HTTP/2
// (net/http's Transport, dialling only that endpoint), and dials for TCP. A meshed endpoint
// (an identity) is reached over TLS 1.3 (internal/tlsid) that verifies the peer proves that
// identity; with an opaque-transport port, over TLS with ALPN transport.l5d.io/v1 to that
// port, starting with the transport header (proxy/transportheader) that names the
// endpoint's port and the session protocol. Unmeshed endpoints get plaintext. Metric handles
// (proxy/metrics: request_total, response_total, response_latency_ms, tcp_*) are resolved
// once per endpoint.
//
// # Lifecycle
//
// Outbound.Run (or Serve with a listener the caller made) blocks until its context ends; it
// then stops accepting, lets in-flight requests and tunnels finish for Config.Grace, closes
// what is left, and waits for every goroutine it started: the accept loop, the per-connection
// goroutines (detection, tunnels), the HTTP server's, one watcher per target and a janitor
// that drops idle targets.
//
// It imports proxy/balance, proxy/detect, proxy/discovery (types only), proxy/h1, proxy/h2,
// proxy/httpproxy, proxy/internal/accept, proxy/internal/handoff, proxy/internal/rawio,
// proxy/metrics, internal/run, internal/tlsid, proxy/transportheader, zap and
// golang.org/x/sys/unix. It must
// not import `shard/...`, `policy/...`, `identity`, `injector/...`, `bench/...`, `cmd/...` or
// `proxy/inbound/...`.
package outbound
