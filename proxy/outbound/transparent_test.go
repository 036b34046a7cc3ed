package outbound

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/meridian-mesh/meridian/proxy/discovery"
)

// nat stands in for iptables' conntrack: the test's dialer records where each connection
// "was going" (by its local address), and OriginalDst answers from it.
type nat struct {
	mu      sync.Mutex
	m       map[string]chan netip.AddrPort
	pending int // dials that have not recorded their destination yet
}

func (n *nat) slot(key string) chan netip.AddrPort {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.m == nil {
		n.m = map[string]chan netip.AddrPort{}
	}
	ch := n.m[key]
	if ch == nil {
		ch = make(chan netip.AddrPort, 1)
		n.m[key] = ch
	}
	return ch
}

// originalDst is Deps.OriginalDst: the destination the test's dialer recorded (it may record
// it just after the proxy accepted); none for a connection the test's dialer did not make.
func (n *nat) originalDst(c net.Conn) (netip.AddrPort, error) {
	n.mu.Lock()
	_, known := n.m[c.RemoteAddr().String()]
	pending := n.pending
	n.mu.Unlock()
	if !known && pending == 0 {
		return netip.AddrPort{}, errors.New("no conntrack entry")
	}
	select {
	case d := <-n.slot(c.RemoteAddr().String()):
		return d, nil
	case <-time.After(5 * time.Second):
		return netip.AddrPort{}, errors.New("no conntrack entry")
	}
}

// dial connects to the proxy as if the application had dialled dst.
func (n *nat) dial(ctx context.Context, proxyAddr string, dst netip.AddrPort) (net.Conn, error) {
	n.mu.Lock()
	n.pending++
	n.mu.Unlock()
	defer func() {
		n.mu.Lock()
		n.pending--
		n.mu.Unlock()
	}()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", proxyAddr)
	if err != nil {
		return nil, err
	}
	n.slot(c.LocalAddr().String()) <- dst
	return c, nil
}

// client is an HTTP client whose every connection is redirected to the proxy with dst as its
// original destination (h2: HTTP/2 with prior knowledge).
func (n *nat) client(t testing.TB, proxyAddr string, dst netip.AddrPort, h2 bool) *http.Client {
	t.Helper()
	var p http.Protocols
	if h2 {
		p.SetUnencryptedHTTP2(true)
	} else {
		p.SetHTTP1(true)
	}
	tr := &http.Transport{Protocols: &p, DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return n.dial(ctx, proxyAddr, dst)
	}}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

var clusterIP = netip.MustParseAddrPort("10.96.0.10:8080")

func TestTransparentHTTP(t *testing.T) {
	byIP, byName := startApp(t, "by-ip"), startApp(t, "by-name")
	r := newFakeResolver()
	r.target(clusterIP.String(), plainEndpoint(byIP))
	r.target(webAuth, plainEndpoint(byName))
	r.refuse("gone.shop.svc.cluster.local:8080")
	n := &nat{}
	_, addr := startProxy(t, testConfig(), Deps{Resolver: r, OriginalDst: n.originalDst})

	for _, h2 := range []bool{false, true} {
		c := n.client(t, addr, clusterIP, h2)
		for _, tc := range []struct{ host, app string }{
			{"10.96.0.10:8080", "by-ip"},                  // an address: the original destination
			{webAuth, "by-name"},                          // a cluster name: the Host
			{"web.shop.svc.cluster.local", "by-name"},     // its port is the original destination's
			{"example.com", "by-ip"},                      // not a cluster name
			{"gone.shop.svc.cluster.local:8080", "by-ip"}, // discovery refuses it: where the client sent it
		} {
			req, _ := http.NewRequest(http.MethodGet, "http://10.96.0.10:8080/x", nil)
			req.Host = tc.host
			res, err := c.Do(req)
			if err != nil {
				t.Fatalf("h2=%v Host %s: %v", h2, tc.host, err)
			}
			_, _ = io.Copy(io.Discard, res.Body)
			_ = res.Body.Close()
			if got := res.Header.Get("X-App"); res.StatusCode != 200 || got != tc.app {
				t.Errorf("h2=%v Host %s: %d from %q, want %s", h2, tc.host, res.StatusCode, got, tc.app)
			}
			if got := res.Header.Get("X-Host"); got != tc.host {
				t.Errorf("h2=%v: the app saw Host %q, want %q", h2, got, tc.host)
			}
		}
	}
}

func TestExplicitWhenNoOriginalDestination(t *testing.T) {
	app := startApp(t, "web-1")
	r := newFakeResolver()
	r.target(webAuth, plainEndpoint(app))
	for name, od := range map[string]func(net.Conn) (netip.AddrPort, error){
		"getsockopt fails":    func(net.Conn) (netip.AddrPort, error) { return netip.AddrPort{}, errors.New("ENOENT") },
		"the listener itself": func(c net.Conn) (netip.AddrPort, error) { return netip.ParseAddrPort(c.LocalAddr().String()) },
		"SO_ORIGINAL_DST":     nil, // the real one: on loopback without NAT, no redirect
	} {
		t.Run(name, func(t *testing.T) {
			_, addr := startProxy(t, testConfig(), Deps{Resolver: r, OriginalDst: od})
			if res, body := get(t, proxyClient(t, addr), "http://"+webAuth+"/"); res.StatusCode != 200 || body != "web-1 HTTP/1.1" {
				t.Errorf("explicit request: %d %q", res.StatusCode, body)
			}
		})
	}
}

func TestTransparentOpaque(t *testing.T) {
	echoAddr := startEcho(t)
	r := newFakeResolver()
	r.target("10.96.0.20:5432", plainEndpoint(echoAddr)) // an opaque port by default
	r.target("10.96.0.21:7000", plainEndpoint(echoAddr)).update(func(s *discovery.Snapshot) { s.Profile.Opaque = true })
	hinted := plainEndpoint(echoAddr)
	hinted.Hint = discovery.HintOpaque
	r.target("10.96.0.22:7000").update(func(s *discovery.Snapshot) { s.Profile.Endpoint = &hinted })
	r.target("10.96.0.23:7000", plainEndpoint(echoAddr)) // detected
	n := &nat{}
	cfg := testConfig()
	cfg.DetectTimeout = 100 * time.Millisecond
	_, addr := startProxy(t, cfg, Deps{Resolver: r, OriginalDst: n.originalDst})

	httpish := "GET / HTTP/1.1\r\nHost: x\r\n\r\n" // HTTP, were it detected: the echo proves it was not
	for dst, msg := range map[string]string{
		"10.96.0.20:5432": httpish,
		"10.96.0.21:7000": httpish,
		"10.96.0.22:7000": httpish,
		"10.96.0.23:7000": "\x00\x01binary protocol",
	} {
		if got := transparentEcho(t, n, addr, netip.MustParseAddrPort(dst), msg, true); got != msg {
			t.Errorf("%s: echoed %q, want %q", dst, got, msg)
		}
	}
	// A client that sends nothing within the detection timeout is opaque too (a server-first
	// protocol): its bytes after that are tunnelled.
	if got := transparentEcho(t, n, addr, netip.MustParseAddrPort("10.96.0.23:7000"), "late", false); got != "late" {
		t.Errorf("after the detection timeout: %q", got)
	}
}

// transparentEcho connects to dst through the proxy, sends msg (after the detection timeout
// when now is false), half-closes, and returns what came back.
func transparentEcho(t testing.TB, n *nat, proxyAddr string, dst netip.AddrPort, msg string, now bool) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := n.dial(ctx, proxyAddr, dst)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if !now {
		// Wait for the proxy to give up on detection: the echo server sees the connection
		// only then, and answers nothing; a one-byte probe would be data. Reading with a
		// short deadline is the wait.
		_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		_, _ = c.Read(make([]byte, 1))
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	}
	if _, err := io.WriteString(c, msg); err != nil {
		t.Fatal(err)
	}
	_ = c.(*net.TCPConn).CloseWrite()
	b, _ := io.ReadAll(c)
	return string(b)
}

func TestNotMeshNameGoesDirect(t *testing.T) {
	app, echoAddr := startApp(t, "outside"), startEcho(t)
	r := newFakeResolver()
	r.refuse(app.String())
	r.refuse(echoAddr.String())
	r.refuse("localhost:" + itoa(app.Port()))
	n := &nat{}
	_, addr := startProxy(t, testConfig(), Deps{Resolver: r, OriginalDst: n.originalDst})

	// Explicit: to the authority the client named (a name is resolved by DNS).
	for _, u := range []string{"http://" + app.String() + "/", "http://localhost:" + itoa(app.Port()) + "/"} {
		if res, body := get(t, proxyClient(t, addr), u); res.StatusCode != 200 || body != "outside HTTP/1.1" {
			t.Errorf("explicit %s: %d %q", u, res.StatusCode, body)
		}
	}
	if got := connectEcho(t, addr, echoAddr.String(), "plain tcp"); got != "plain tcp" {
		t.Errorf("CONNECT direct: %q", got)
	}
	// Transparent: to the original destination, HTTP and TCP.
	if res, body := get(t, n.client(t, addr, app, false), "http://"+app.String()+"/"); res.StatusCode != 200 || body != "outside HTTP/1.1" {
		t.Errorf("transparent: %d %q", res.StatusCode, body)
	}
	if got := transparentEcho(t, n, addr, echoAddr, "\x00tcp", true); got != "\x00tcp" {
		t.Errorf("transparent TCP direct: %q", got)
	}
}

func TestNoEndpointsFailsFast(t *testing.T) {
	r := newFakeResolver()
	r.target(webAuth)
	r.target("db.shop.svc.cluster.local:5432")
	r.target("10.96.0.30:5432")
	n := &nat{}
	_, addr := startProxy(t, testConfig(), Deps{Resolver: r, OriginalDst: n.originalDst})

	res, _ := get(t, proxyClient(t, addr), "http://"+webAuth+"/")
	if res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("L5d-Proxy-Error") == "" {
		t.Errorf("HTTP: %d %q, want 503 with l5d-proxy-error", res.StatusCode, res.Header.Get("L5d-Proxy-Error"))
	}
	res, _ = get(t, proxyClient(t, addr), "http://"+webAuth+"/", "Content-Type", "application/grpc")
	if res.StatusCode != 200 || res.Header.Get("Grpc-Status") != "14" {
		t.Errorf("gRPC: %d grpc-status %q, want 200 and 14 (UNAVAILABLE)", res.StatusCode, res.Header.Get("Grpc-Status"))
	}
	if code := connectStatus(t, addr, "db.shop.svc.cluster.local:5432"); code != http.StatusServiceUnavailable {
		t.Errorf("CONNECT: %d, want 503", code)
	}
	// Transparent TCP: the connection is reset at once, before the client sends anything.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := n.dial(ctx, addr, netip.MustParseAddrPort("10.96.0.30:5432"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("transparent TCP to no endpoints: read %v, want a reset (ECONNRESET), not an end of stream", err)
	}
}

func itoa(p uint16) string { return strconv.Itoa(int(p)) }
