package outbound

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"syscall"

	"golang.org/x/sys/unix"
)

// ip6tSOOriginalDst is IP6T_SO_ORIGINAL_DST (linux/netfilter_ipv6/ip6_tables.h), which
// x/sys does not define; it has SO_ORIGINAL_DST's value.
const ip6tSOOriginalDst = 80

// origDst reads a redirected TCP connection's original destination with getsockopt
// SO_ORIGINAL_DST (IP6T_SO_ORIGINAL_DST for IPv6), which netfilter answers from the
// connection's conntrack entry. Without a NAT rule it fails (ENOENT) or returns the local
// address itself; both make the connection explicit. It stands in for proxy/origdst until
// that package lands; then this file and origdst_other.go go.
func origDst(c net.Conn) (netip.AddrPort, error) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return netip.AddrPort{}, fmt.Errorf("original destination: %T is not a socket", c)
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("original destination: %w", err)
	}
	v6 := false
	if la, ok := c.LocalAddr().(*net.TCPAddr); ok && la.IP.To4() == nil {
		v6 = true
	}
	var ap netip.AddrPort
	var serr error
	err = rc.Control(func(fd uintptr) {
		if v6 {
			info, err := unix.GetsockoptIPv6MTUInfo(int(fd), unix.SOL_IPV6, ip6tSOOriginalDst)
			if err != nil {
				serr = err
				return
			}
			var port [2]byte
			binary.NativeEndian.PutUint16(port[:], info.Addr.Port)
			ap = netip.AddrPortFrom(netip.AddrFrom16(info.Addr.Addr), binary.BigEndian.Uint16(port[:]))
			return
		}
		// sockaddr_in fits in the 16 bytes of an ipv6_mreq, the usual way to read it.
		mreq, err := unix.GetsockoptIPv6Mreq(int(fd), unix.SOL_IP, unix.SO_ORIGINAL_DST)
		if err != nil {
			serr = err
			return
		}
		ap, serr = sockaddr4(mreq.Multiaddr)
	})
	if err == nil {
		err = serr
	}
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("original destination: getsockopt SO_ORIGINAL_DST: %w", err)
	}
	return ap, nil
}

// sockaddr4 decodes a struct sockaddr_in: family (native order), port (network order), the
// address, and padding.
func sockaddr4(b [16]byte) (netip.AddrPort, error) {
	if fam := binary.NativeEndian.Uint16(b[0:2]); fam != unix.AF_INET {
		return netip.AddrPort{}, fmt.Errorf("address family %d, want AF_INET", fam)
	}
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[4:8])), binary.BigEndian.Uint16(b[2:4])), nil
}
