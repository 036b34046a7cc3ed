// Package h1 is the proxy's lean HTTP/1.1 codec, shared by the outbound and the inbound
// side: it reads message heads in place (a Head holds the raw bytes of one head and slices
// of them, reused for every message of a connection), relays bodies between bufio buffers
// in their framing (Content-Length, chunked with extensions and trailers, or until the
// connection closes), writes the heads the proxy forwards, and pools upstream keep-alive
// connections. A proxied request allocates nothing here.
//
// It accepts only what it understands exactly. A request it is unsure of (ErrNotLean: an
// obs-fold, duplicate Transfer-Encoding, an unusual target, too many fields, ...) is for the
// caller to hand, unread, to net/http's server, which answers or refuses it; a response it
// cannot parse (ErrBadResponse) is a 502. Its parsers are fuzzed against net/http's: what it
// accepts, net/http accepts and frames the same way.
//
// A Watch notices a client that leaves while its request waits for the response head (both
// sides close the upstream connection then, as linkerd2-proxy drops such a request).
//
// It holds no goroutines but a Watch's, which reads the client connection only once a head
// has taken longer than WatchDelay, and which Disarm waits for; a Head, a Conn and the relay
// functions are for one goroutine at a time, a Pool is safe for concurrent use.
//
// It must not import any other Meridian package: `github.com/meridian-mesh/meridian/...`.
//
// Allowed imports: `std`.
package h1
