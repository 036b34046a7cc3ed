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
