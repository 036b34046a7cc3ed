package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"

	pbnet "github.com/linkerd/linkerd2-proxy-api/go/net"
)

// IP converts an address to its API form; IPv4-mapped IPv6 addresses are sent as IPv4.
func IP(a netip.Addr) *pbnet.IPAddress {
	a = a.Unmap()
	if a.Is4() {
		b := a.As4()
		return &pbnet.IPAddress{Ip: &pbnet.IPAddress_Ipv4{Ipv4: binary.BigEndian.Uint32(b[:])}}
	}
	b := a.As16()
	return &pbnet.IPAddress{Ip: &pbnet.IPAddress_Ipv6{Ipv6: &pbnet.IPv6{
		First: binary.BigEndian.Uint64(b[:8]),
		Last:  binary.BigEndian.Uint64(b[8:]),
	}}}
}

// TCPAddr converts an address and port to its API form.
func TCPAddr(ap netip.AddrPort) *pbnet.TcpAddress {
	return &pbnet.TcpAddress{Ip: IP(ap.Addr()), Port: uint32(ap.Port())}
}

// ToAddr converts an API address back.
func ToAddr(ip *pbnet.IPAddress) (netip.Addr, error) {
	switch v := ip.GetIp().(type) {
	case *pbnet.IPAddress_Ipv4:
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], v.Ipv4)
		return netip.AddrFrom4(b), nil
	case *pbnet.IPAddress_Ipv6:
		if v.Ipv6 == nil {
			return netip.Addr{}, errors.New("ipv6 address without value")
		}
		var b [16]byte
		binary.BigEndian.PutUint64(b[:8], v.Ipv6.First)
		binary.BigEndian.PutUint64(b[8:], v.Ipv6.Last)
		return netip.AddrFrom16(b), nil
	default:
		return netip.Addr{}, errors.New("address has no IP")
	}
}

// ToAddrPort converts an API TCP address back.
func ToAddrPort(a *pbnet.TcpAddress) (netip.AddrPort, error) {
	ip, err := ToAddr(a.GetIp())
	if err != nil {
		return netip.AddrPort{}, err
	}
	if a.GetPort() > 65535 {
		return netip.AddrPort{}, fmt.Errorf("port %d out of range", a.GetPort())
	}
	return netip.AddrPortFrom(ip, uint16(a.GetPort())), nil
}
