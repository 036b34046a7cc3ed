package wire

import (
	"net/netip"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	for _, s := range []string{"10.1.2.3:8080", "[fd00::1:2]:443", "[::ffff:10.0.0.1]:80", "0.0.0.0:1"} {
		ap := netip.MustParseAddrPort(s)
		got, err := ToAddrPort(TCPAddr(ap))
		if err != nil {
			t.Fatal(err)
		}
		want := netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
		if got != want {
			t.Fatalf("%s: round trip gave %s", s, got)
		}
	}
	if _, err := ToAddrPort(nil); err == nil {
		t.Fatal("nil address must be an error")
	}
}

func TestAddrKey(t *testing.T) {
	for _, s := range []string{"10.0.0.1:8080", "[fd00::1]:80", "[::ffff:10.0.0.1]:443", "0.0.0.0:0", "[::]:65535"} {
		ap := netip.MustParseAddrPort(s)
		if got := KeyOf(ap).AddrPort(); got != ap {
			t.Errorf("%s: round trip gives %s", ap, got)
		}
	}
	if KeyOf(netip.MustParseAddrPort("10.0.0.1:80")) == KeyOf(netip.MustParseAddrPort("[::ffff:10.0.0.1]:80")) {
		t.Error("an IPv4 address and its IPv4-mapped IPv6 form share a key")
	}
}
