//go:build !linux

package outbound

import (
	"errors"
	"net"
	"net/netip"
)

// origDst has no SO_ORIGINAL_DST to read outside Linux: every connection is explicit.
func origDst(net.Conn) (netip.AddrPort, error) {
	return netip.AddrPort{}, errors.ErrUnsupported
}
