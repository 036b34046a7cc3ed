//go:build !linux

package rawio

import "net"

// Wrap returns c: the raw path is Linux's only.
func Wrap(c net.Conn) net.Conn { return c }
