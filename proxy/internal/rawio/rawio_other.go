//go:build !linux

package rawio

import "net"

// Wrap returns c: the raw path is Linux's only.
func Wrap(c net.Conn) net.Conn { return c }

// Ordinary does nothing and reports false: no connection is raw here.
func Ordinary(net.Conn) bool { return false }
