// Package transportheader reads and writes Linkerd's opaque transport header, the few bytes a
// client proxy sends first on a mutually authenticated connection to a meshed pod's inbound
// port (4143) to say which application port it wants, so that one proxy port can carry
// traffic for every port of the pod.
//
// The connection negotiates the ALPN protocol "transport.l5d.io/v1" (ALPN). The client then
// writes, before any application byte:
//
//	"transport.l5d.io/v1\r\n\r\n"   the preface (Preface)
//	u32, big-endian                  the length of the message that follows
//	Header message (protobuf)        as in linkerd2-proxy's linkerd/transport-header/proto/header.proto:
//
//	message Header {
//	  int32 port = 1;                       // the target port: 1..65535
//	  string name = 2;                      // an optional DNS name (gateway forwarding)
//	  SessionProtocol session_protocol = 3; // absent: opaque
//	}
//	message SessionProtocol {
//	  message Http1 {}
//	  message Http2 {}
//	  oneof kind { Http1 http1 = 1; Http2 http2 = 2; }
//	}
//
// The proto is not in linkerd2-proxy-api, so this package encodes and decodes it by hand with
// protowire, following protobuf's rules: unknown fields are skipped, a repeated scalar field
// keeps its last value, a repeated message field merges. Like linkerd2-proxy (prost), it
// rejects a known field sent with the wrong wire type. It accepts what linkerd2-proxy
// accepts: a port in 1..65535, a name that is a DNS name by linkerd's rules (RFC 5280
// section 7.2 with underscores; returned lowercased), a message of at most MaxLen bytes
// (linkerd reads the header into a 64 KiB buffer).
//
// Read consumes exactly the header's bytes, so the application stream starts at the next
// byte of the same reader. It has no timeout of its own: the caller sets a read deadline
// (linkerd2-proxy uses its 10 s detection timeout). Everything here is a pure function of
// its arguments and safe for concurrent use.
//
// It imports the standard library and google.golang.org/protobuf/encoding/protowire only. It
// must not import shard, policy, identity's server package, injector, bench, cmd or any other
// Meridian package: `github.com/meridian-mesh/meridian/...`.
//
// Allowed imports: `std`, `google.golang.org/protobuf/encoding/protowire`.
package transportheader
