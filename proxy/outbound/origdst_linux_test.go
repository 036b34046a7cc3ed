package outbound

import (
	"encoding/binary"
	"net/netip"
	"testing"

	"golang.org/x/sys/unix"
)

func TestSockaddr4(t *testing.T) {
	var b [16]byte
	binary.NativeEndian.PutUint16(b[0:2], unix.AF_INET)
	binary.BigEndian.PutUint16(b[2:4], 8080)
	copy(b[4:8], []byte{10, 96, 0, 10})
	if ap, err := sockaddr4(b); err != nil || ap != netip.MustParseAddrPort("10.96.0.10:8080") {
		t.Errorf("sockaddr4 = %v, %v", ap, err)
	}
	binary.NativeEndian.PutUint16(b[0:2], unix.AF_INET6)
	if _, err := sockaddr4(b); err == nil {
		t.Error("AF_INET6 accepted as a sockaddr_in")
	}
}

func FuzzSockaddr4(f *testing.F) {
	f.Add([]byte{2, 0, 0x1f, 0x90, 10, 96, 0, 10, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add(make([]byte, 16))
	f.Fuzz(func(t *testing.T, in []byte) {
		var b [16]byte
		copy(b[:], in)
		ap, err := sockaddr4(b)
		if err == nil && (!ap.Addr().Is4() || ap.Port() != binary.BigEndian.Uint16(b[2:4])) {
			t.Fatalf("sockaddr4(%x) = %v", b, ap)
		}
	})
}
