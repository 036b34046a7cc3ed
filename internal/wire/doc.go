// Package wire converts between Go's net/netip values and the address messages of Linkerd's
// proxy API (io.linkerd.proxy.net). Servers and the proxy share it; it imports only the
// generated API and the standard library: it must not import
// `github.com/meridian-mesh/meridian/...`.
//
// Allowed imports: `std`, `github.com/linkerd/linkerd2-proxy-api/go/net`.
package wire
