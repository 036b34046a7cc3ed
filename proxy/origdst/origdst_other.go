//go:build !linux

package origdst

import (
	"net"
	"net/netip"
)

func originalDst(*net.TCPConn) (netip.AddrPort, error) { return netip.AddrPort{}, ErrUnsupported }
