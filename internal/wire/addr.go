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

// AddrKey is an address and port as a comparable value without pointers (a netip.Addr holds
// one for its zone), for maps of many addresses: the garbage collector does not scan such a
// map's entries. Zones are not kept (the proxy API has none).
type AddrKey [19]byte

// KeyOf returns the key of ap.
func KeyOf(ap netip.AddrPort) AddrKey {
	var k AddrKey
	a := ap.Addr().As16()
	copy(k[:16], a[:])
	k[16], k[17] = byte(ap.Port()>>8), byte(ap.Port())
	if ap.Addr().Is4() {
		k[18] = 4
	}
	return k
}

// AddrPort returns the address and port of k.
func (k AddrKey) AddrPort() netip.AddrPort {
	a := netip.AddrFrom16([16]byte(k[:16]))
	if k[18] == 4 {
		a = a.Unmap()
	}
	return netip.AddrPortFrom(a, uint16(k[16])<<8|uint16(k[17]))
}
