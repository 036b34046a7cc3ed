// Package origdst answers, for a connection that iptables redirected to the proxy (the nat
// REDIRECT rules of `meridian proxy-init`), the address the client originally dialled: the
// SO_ORIGINAL_DST socket option for IPv4 and IP6T_SO_ORIGINAL_DST for IPv6, read from the
// connection's conntrack entry.
//
// OriginalDst is its whole API. It returns ErrNotRedirected for a connection that was not
// redirected (the original destination is the socket's own local address, or there is no
// conntrack entry), and ErrUnsupported on systems other than Linux and for connections that
// are not TCP sockets; callers then fall back to a configured target.
//
// It owns nothing and starts no goroutines. Allowed imports: `std`, `golang.org/x/sys/unix`.
// It must not import `github.com/meridian-mesh/meridian/...`.
package origdst
