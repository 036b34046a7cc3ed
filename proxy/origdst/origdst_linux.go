package origdst

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Linux's netfilter socket options (linux/netfilter_ipv4.h, linux/netfilter_ipv6/ip6_tables.h).
const (
	soOriginalDst     = 80 // SO_ORIGINAL_DST, level SOL_IP
	ip6tSoOriginalDst = 80 // IP6T_SO_ORIGINAL_DST, level SOL_IPV6
)

func originalDst(c *net.TCPConn) (netip.AddrPort, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("origdst: %w", err)
	}
	local := localAddrPort(c)
	var (
		dst  netip.AddrPort
		serr error
	)
	err = raw.Control(func(fd uintptr) {
		if local.Addr().Is4() {
			dst, serr = getsockopt4(int(fd))
		} else {
			dst, serr = getsockopt6(int(fd))
		}
	})
	if err == nil {
		err = serr
	}
	switch {
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ENOPROTOOPT):
		return netip.AddrPort{}, ErrNotRedirected // no conntrack entry, or no nat table
	case err != nil:
		return netip.AddrPort{}, fmt.Errorf("origdst: getsockopt: %w", err)
	case dst == local:
		return netip.AddrPort{}, ErrNotRedirected
	}
	return dst, nil
}

// getsockopt4 reads a struct sockaddr_in.
func getsockopt4(fd int) (netip.AddrPort, error) {
	var sa unix.RawSockaddrInet4
	size := uint32(unsafe.Sizeof(sa))
	if err := getsockopt(fd, unix.SOL_IP, soOriginalDst, unsafe.Pointer(&sa), &size); err != nil {
		return netip.AddrPort{}, err
	}
	port := binary.BigEndian.Uint16((*[2]byte)(unsafe.Pointer(&sa.Port))[:])
	return netip.AddrPortFrom(netip.AddrFrom4(sa.Addr), port), nil
}

// getsockopt6 reads a struct sockaddr_in6.
func getsockopt6(fd int) (netip.AddrPort, error) {
	var sa unix.RawSockaddrInet6
	size := uint32(unsafe.Sizeof(sa))
	if err := getsockopt(fd, unix.SOL_IPV6, ip6tSoOriginalDst, unsafe.Pointer(&sa), &size); err != nil {
		return netip.AddrPort{}, err
	}
	port := binary.BigEndian.Uint16((*[2]byte)(unsafe.Pointer(&sa.Port))[:])
	return netip.AddrPortFrom(netip.AddrFrom16(sa.Addr).Unmap(), port), nil
}

func getsockopt(fd, level, name int, val unsafe.Pointer, size *uint32) error {
	_, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), uintptr(level), uintptr(name),
		uintptr(val), uintptr(unsafe.Pointer(size)), 0)
	if e != 0 {
		return e
	}
	return nil
}

// localAddrPort is c's local address, IPv4-mapped addresses unmapped.
func localAddrPort(c *net.TCPConn) netip.AddrPort {
	a, _ := c.LocalAddr().(*net.TCPAddr)
	if a == nil {
		return netip.AddrPort{}
	}
	ap := a.AddrPort()
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}
