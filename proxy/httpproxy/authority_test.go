package httpproxy

import (
	"strings"
	"testing"
)

func TestParseAuthority(t *testing.T) {
	cases := []struct {
		in      string
		defPort uint16
		want    Authority
		err     string // a part of the error; "" for success
	}{
		{"web.shop.svc.cluster.local:8080", 80, Authority{"web.shop.svc.cluster.local", 8080}, ""},
		{"Web.Shop.SVC.cluster.local.:8080", 80, Authority{"web.shop.svc.cluster.local", 8080}, ""},
		{"web", 80, Authority{"web", 80}, ""},
		{"web:", 80, Authority{"web", 80}, ""},
		{"my_svc-1.ns", 80, Authority{"my_svc-1.ns", 80}, ""},
		{"10.0.0.1:443", 80, Authority{"10.0.0.1", 443}, ""},
		{"10.0.0.1.", 80, Authority{"10.0.0.1", 80}, ""},
		{"[::1]:8080", 80, Authority{"::1", 8080}, ""},
		{"[2001:DB8:0:0::1]", 80, Authority{"2001:db8::1", 80}, ""},
		{"[::ffff:10.0.0.1]:80", 80, Authority{"::ffff:10.0.0.1", 80}, ""},
		{"web:65535", 0, Authority{"web", 65535}, ""},
		{"web", 0, Authority{}, "no port"},
		{"web:", 0, Authority{}, "no port"},
		{"", 80, Authority{}, "empty"},
		{":80", 80, Authority{}, "empty host"},
		{".:80", 80, Authority{}, "empty host"},
		{"web:0", 80, Authority{}, "out of range"},
		{"web:65536", 80, Authority{}, "out of range"},
		{"web:+80", 80, Authority{}, "bad port"},
		{"web:8o", 80, Authority{}, "bad port"},
		{"web:000080", 80, Authority{}, "bad port"},
		{"web:-1", 80, Authority{}, "bad port"},
		{"::1", 80, Authority{}, "brackets"},
		{"::1:80", 80, Authority{}, "brackets"},
		{"[::1", 80, Authority{}, "missing ']'"},
		{"[::1]x", 80, Authority{}, "after ']'"},
		{"[10.0.0.1]:80", 80, Authority{}, "bad IPv6"},
		{"[fe80::1%25eth0]:80", 80, Authority{}, "bad IPv6"},
		{"[fe80::1%eth0]:80", 80, Authority{}, "bad IPv6"},
		{"10.0.0.256", 80, Authority{}, "bad IPv4"},
		{"010.0.0.1", 80, Authority{}, "bad IPv4"},
		{"1.2.3", 80, Authority{}, "bad IPv4"},
		{"a..b", 80, Authority{}, "labels"},
		{strings.Repeat("a", 64) + ".b", 80, Authority{}, "labels"},
		{strings.Repeat("a.", 127) + "bc", 80, Authority{}, "253"},
		{"user@web:80", 80, Authority{}, "byte '@'"},
		{"we b:80", 80, Authority{}, "byte ' '"},
		{"café:80", 80, Authority{}, "bad host"},
		{"web%2e:80", 80, Authority{}, "byte '%'"},
	}
	for _, tc := range cases {
		got, err := ParseAuthority(tc.in, tc.defPort)
		switch {
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("ParseAuthority(%q, %d) = %+v, %v; want %+v", tc.in, tc.defPort, got, err, tc.want)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("ParseAuthority(%q, %d) = %+v, %v; want an error about %q", tc.in, tc.defPort, got, err, tc.err)
		case err != nil && len(err.Error()) > 200:
			t.Errorf("ParseAuthority(%q): the error quotes too much", tc.in)
		}
	}
}

func TestAuthorityString(t *testing.T) {
	for _, tc := range []struct {
		a    Authority
		want string
		ip   bool
	}{
		{Authority{"web.shop", 8080}, "web.shop:8080", false},
		{Authority{"10.0.0.1", 80}, "10.0.0.1:80", true},
		{Authority{"2001:db8::1", 443}, "[2001:db8::1]:443", true},
	} {
		if got := tc.a.String(); got != tc.want {
			t.Errorf("%+v.String() = %q, want %q", tc.a, got, tc.want)
		}
		if back, err := ParseAuthority(tc.a.String(), 0); err != nil || back != tc.a {
			t.Errorf("ParseAuthority(%q) = %+v, %v", tc.a.String(), back, err)
		}
		if _, ok := tc.a.Addr(); ok != tc.ip {
			t.Errorf("%+v.Addr() ok = %v, want %v", tc.a, ok, tc.ip)
		}
	}
}

func BenchmarkParseAuthority(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseAuthority("web.shop.svc.cluster.local:8080", 80); err != nil {
			b.Fatal(err)
		}
	}
}
