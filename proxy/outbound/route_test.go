package outbound

import (
	"bufio"
	"context"
	"errors"
	"net/http"
	"net/netip"
	"strings"
	"testing"

	"github.com/meridian-mesh/meridian/proxy/httpproxy"
)

func testOutbound(t testing.TB) *Outbound {
	t.Helper()
	o, err := New(DefaultConfig(), Deps{Resolver: newFakeResolver()})
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func TestRoute(t *testing.T) {
	o := testOutbound(t)
	od := netip.MustParseAddrPort("10.96.0.10:8080")
	for _, tc := range []struct {
		name, raw string
		origDst   netip.AddrPort
		want      string // authority, or "error NNN"
	}{
		{"absolute", "GET http://Web.Shop.svc.cluster.local:8080/x HTTP/1.1\r\nHost: y\r\n\r\n", netip.AddrPort{}, webAuth},
		{"absolute default port", "GET http://web.shop.svc.cluster.local/ HTTP/1.1\r\n\r\n", netip.AddrPort{}, "web.shop.svc.cluster.local:80"},
		{"absolute on a transparent connection", "GET http://a.b.svc.cluster.local:1/ HTTP/1.1\r\n\r\n", od, "a.b.svc.cluster.local:1"},
		{"explicit origin-form by Host", "GET / HTTP/1.1\r\nHost: web.shop.svc.cluster.local:8080\r\n\r\n", netip.AddrPort{}, webAuth},
		{"explicit IPv6", "GET http://[::1]:81/ HTTP/1.1\r\n\r\n", netip.AddrPort{}, "[::1]:81"},
		{"transparent by address", "GET / HTTP/1.1\r\nHost: 10.96.0.10:8080\r\n\r\n", od, "10.96.0.10:8080"},
		{"transparent by cluster name", "GET / HTTP/1.1\r\nHost: WEB.shop.svc.cluster.local.\r\n\r\n", od, "web.shop.svc.cluster.local:8080"},
		{"transparent other name", "GET / HTTP/1.1\r\nHost: example.com\r\n\r\n", od, "10.96.0.10:8080"},
		{"transparent no Host", "GET / HTTP/1.0\r\n\r\n", od, "10.96.0.10:8080"},
		{"transparent suffix lookalike", "GET / HTTP/1.1\r\nHost: evilsvc.cluster.local\r\n\r\n", od, "10.96.0.10:8080"},
		{"explicit no Host", "GET / HTTP/1.0\r\n\r\n", netip.AddrPort{}, "error 400"},
		{"https", "GET https://x/ HTTP/1.1\r\n\r\n", netip.AddrPort{}, "error 400"},
		{"bad Host", "GET / HTTP/1.1\r\nHost: a b\r\n\r\n", netip.AddrPort{}, "error 400"},
	} {
		req, err := http.ReadRequest(bufio.NewReader(strings.NewReader(tc.raw)))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		cc := &clientConn{origDst: tc.origDst}
		if tc.origDst.IsValid() {
			cc.origAuth = tc.origDst.String()
		}
		got, _, err := o.route(cc, req)
		var he *httpproxy.Error
		if errors.As(err, &he) {
			got = "error " + itoa(uint16(he.Status))
		} else if err != nil {
			got = err.Error()
		}
		if got != tc.want {
			t.Errorf("%s: routed to %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestClusterSuffixes(t *testing.T) {
	o := testOutbound(t)
	for host, want := range map[string]bool{
		"web.shop.svc.cluster.local": true, "web.shop.svc.cluster.local.:80": true, "SVC.CLUSTER.LOCAL": true,
		"xsvc.cluster.local": false, "example.com": false, "10.0.0.1": false, "[::1]:80": false, "": false,
	} {
		if got := o.isClusterName(host); got != want {
			t.Errorf("isClusterName(%q) = %v", host, got)
		}
	}
	all, _ := New(Config{ClusterSuffixes: []string{"."}}, Deps{Resolver: newFakeResolver()})
	if !all.isClusterName("example.com") || all.isClusterName("10.0.0.1") {
		t.Error(`suffix "." should match every name and no address`)
	}
}

func TestConfigValidation(t *testing.T) {
	if _, err := New(DefaultConfig(), Deps{}); err == nil {
		t.Error("New without a resolver succeeded")
	}
	bad := DefaultConfig()
	bad.ConnectTimeout = -1
	if _, err := New(bad, Deps{Resolver: newFakeResolver()}); err == nil {
		t.Error("a negative timeout was accepted")
	}
	bad = DefaultConfig()
	bad.OpaquePorts = []uint16{0}
	if _, err := New(bad, Deps{Resolver: newFakeResolver()}); err == nil {
		t.Error("opaque port 0 was accepted")
	}
	o, _ := New(Config{OpaquePorts: []uint16{}}, Deps{Resolver: newFakeResolver()})
	if o.opaque[5432] {
		t.Error("an empty opaque list kept the defaults")
	}
}

func FuzzRoute(f *testing.F) {
	for _, s := range []string{
		"GET http://web.shop.svc.cluster.local:8080/ HTTP/1.1\r\n\r\n",
		"CONNECT db:5432 HTTP/1.1\r\nHost: db:5432\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: web.shop.svc.cluster.local\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: [::1]:80\r\n\r\n",
		"OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET //x HTTP/1.1\r\nHost: x..svc.cluster.local\r\n\r\n",
	} {
		f.Add(s, true)
		f.Add(s, false)
	}
	o := testOutbound(f)
	od := netip.MustParseAddrPort("10.96.0.10:8080")
	f.Fuzz(func(t *testing.T, raw string, transparent bool) {
		req, err := http.ReadRequest(bufio.NewReader(strings.NewReader(raw)))
		if err != nil {
			return
		}
		cc := &clientConn{}
		if transparent {
			cc.origDst, cc.origAuth = od, od.String()
		}
		auth, connect, err := o.route(cc, req)
		if err != nil {
			var he *httpproxy.Error
			if !errors.As(err, &he) || he.Status < 400 || he.Status > 499 {
				t.Fatalf("route error %v is not a 4xx httpproxy.Error", err)
			}
			return
		}
		// Whatever it routes to is a normalised authority.
		a, perr := httpproxy.ParseAuthority(auth, 0)
		if perr != nil || a.String() != auth {
			t.Fatalf("routed to %q, not a normalised authority (%v)", auth, perr)
		}
		if connect != nil && req.Method != http.MethodConnect {
			t.Fatalf("a %s request routed as CONNECT", req.Method)
		}
	})
}

func TestResolverOf(t *testing.T) {
	ft := &fakeTarget{ch: make(chan struct{})}
	r := ResolverOf(func(_ context.Context, a string) (*fakeTarget, error) {
		if a == "bad:1" {
			return nil, errors.New("no")
		}
		return ft, nil
	})
	if got, err := r.Resolve(context.Background(), "good:1"); err != nil || got != Target(ft) {
		t.Errorf("Resolve = %v, %v", got, err)
	}
	if got, err := r.Resolve(context.Background(), "bad:1"); err == nil || got != nil {
		t.Errorf("a failed Resolve gave %#v, %v; want a nil Target", got, err)
	}
}
