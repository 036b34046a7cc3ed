// Package wire converts between Go's net/netip values and the address messages of Linkerd's
// proxy API (io.linkerd.proxy.net), and reads encoded destination updates without decoding
// them (ScanUpdate, Fingerprint: what a relaying replica keeps of the messages it passes
// through; CheckFraming: what it checks of a profile it passes through). Servers and the proxy share it; it imports only the generated API, protobuf's
// wire format and the standard library: it must not import
// `github.com/meridian-mesh/meridian/...`.
//
// Allowed imports: `std`, `github.com/linkerd/linkerd2-proxy-api/go/net`,
// `google.golang.org/protobuf/encoding/protowire`.
package wire
