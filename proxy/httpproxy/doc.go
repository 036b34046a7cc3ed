// Package httpproxy is the explicit-proxy side of the outbound listener: it reads the
// requests a client sends to 127.0.0.1:4140 when it uses the proxy as an HTTP proxy
// (`curl -x http://127.0.0.1:4140 http://web.shop.svc.cluster.local:8080/`, or HTTP CONNECT
// for any TCP protocol) and says where each one goes.
//
// A request's target comes in one of three forms (RFC 9112, section 3.2):
//
//   - absolute-form, GET http://host[:port]/path HTTP/1.1: the target is the URI's authority
//     (port 80 by default); the request is rewritten to origin-form for forwarding, its Host
//     the authority the client named;
//   - authority-form, CONNECT host:port HTTP/1.1: a TCP tunnel to host:port; the caller
//     answers ConnectEstablished ("HTTP/1.1 200 Connection established") and copies bytes,
//     starting with Reader.Buffered;
//   - origin-form, GET /path HTTP/1.1: the target is the connection's original destination
//     when the caller knows one (transparent traffic), else the Host header.
//
// Anything else is refused with an *Error that carries the status and a precise reason: 400
// for a malformed request, an unsupported scheme or protocol version, a bad host or port,
// or origin-form without Host and without an original destination; 431 for a request head
// over Options.MaxHeaderBytes (64 KiB, enforced with 4 KiB of slack as net/http does).
//
// Reader is built on net/http's request parser (http.ReadRequest) over a bufio.Reader whose
// source is cut off at the head bound, so a client cannot make it buffer more than the bound
// per request. Classify does the same classification for a request some other net/http code
// has read (an http.Server handler sees absolute-form and CONNECT requests too).
// ParseAuthority is the one host:port normaliser (IPv6 brackets, lowercase host, trailing
// dot removed) that the explicit proxy and discovery share.
//
// Classify and ParseAuthority are pure and safe for concurrent use; a Reader belongs to the
// goroutine serving its connection.
//
// It imports the standard library only. It must not import shard, policy, identity's server
// package, injector, bench, cmd or any other Meridian package:
// `github.com/meridian-mesh/meridian/...`.
//
// Allowed imports: `std`.
package httpproxy
