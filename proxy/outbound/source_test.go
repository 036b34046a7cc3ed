package outbound

import (
	"context"
	"net"
	"net/netip"
	"testing"
)

// A loopback source address (the local mesh's pod address) is used for peers on loopback
// only: from 127.x.y.z the kernel cannot reach another host, and a name may resolve
// anywhere. Another source address applies to every connection.
func TestSourceAddrOnlyWhereItCanReach(t *testing.T) {
	for _, tc := range []struct {
		src, addr string
		bound     bool
	}{
		{"", "127.0.0.1:80", false},
		{"127.0.10.1", "127.0.20.1:4143", true},
		{"127.0.10.1", "[::1]:4143", true},
		{"127.0.10.1", "192.0.2.7:80", false},
		{"127.0.10.1", "example.com:80", false},
		{"10.0.0.5", "192.0.2.7:80", true},
		{"10.0.0.5", "example.com:80", true},
	} {
		cfg := DefaultConfig()
		if tc.src != "" {
			cfg.SourceAddr = netip.MustParseAddr(tc.src)
		}
		o, err := New(cfg, Deps{Resolver: ResolverOf(func(ctx context.Context, authority string) (Target, error) { return nil, nil })})
		if err != nil {
			t.Fatal(err)
		}
		d := o.dialerFor(tc.addr)
		got := d.LocalAddr != nil
		if got != tc.bound {
			t.Errorf("source %q, dial %s: bound to a source %v, want %v", tc.src, tc.addr, got, tc.bound)
		}
		if got && d.LocalAddr.(*net.TCPAddr).IP.String() != tc.src {
			t.Errorf("source %q, dial %s: bound to %v", tc.src, tc.addr, d.LocalAddr)
		}
		o.cancel()
	}
}
