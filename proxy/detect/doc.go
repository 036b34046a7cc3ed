// Package detect tells, from the first bytes a client sends on a connection, which protocol
// the proxy is handling: HTTP/1, HTTP/2, or anything else (opaque TCP, proxied byte for byte).
//
// Detect is the pure core. It looks at a prefix of the stream and answers HTTP1 once it has
// seen a whole HTTP/1 request line (METHOD SP request-target SP HTTP/1.x CRLF, checked
// strictly enough that binary protocols do not pass), HTTP2 once it has seen the whole
// client preface ("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), Opaque as soon as the bytes cannot
// begin either, and NeedMore while they still could. Its answers are monotone: once it says
// HTTP1, HTTP2 or Opaque for a prefix, it says the same for every extension of it.
//
// Empty lines before a request line are skipped (RFC 9112, section 2.2), as linkerd2-proxy's
// parser skips them.
//
// Peek is the I/O helper around it. It reads from a net.Conn until Detect decides, up to
// Config.MaxBytes (8 KiB) and for at most Config.Timeout (10 s, linkerd2-proxy's detection
// timeout). A connection still undecided at either bound, or when the client stops sending,
// is HTTP1 if what it sent could still begin a request (empty lines alone too;
// linkerd2-proxy takes a partial request line as HTTP/1), else Opaque: a request line too long to decide on must not reach
// the application as opaque bytes, past the HTTP handling that checks routes and strips
// l5d-client-id. It returns a Conn that replays the bytes it read before the rest of the
// stream, so the HTTP server or the TCP forwarder downstream sees the connection from its
// first byte.
//
// Callers skip detection for ports in the opaque list and endpoints with an opaque hint.
//
// Detect is safe for concurrent use. Peek owns the connection's read side while it runs;
// a Conn is used like the net.Conn it wraps (one reader at a time).
//
// It imports the standard library only. It must not import shard, policy, identity's server
// package, injector, bench, cmd or any other Meridian package:
// `github.com/meridian-mesh/meridian/...`.
//
// Allowed imports: `std`.
package detect
