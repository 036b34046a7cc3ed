package outbound

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/meridian-mesh/meridian/proxy/httpproxy"
	"github.com/meridian-mesh/meridian/proxy/internal/proxytest"
	"github.com/meridian-mesh/meridian/proxy/metrics"
)

func get(t testing.TB, c *http.Client, url string, hdr ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("GET %s: body: %v", url, err)
	}
	return res, string(b)
}

func TestExplicitAbsoluteForm(t *testing.T) {
	app := startApp(t, "web-1")
	r := newFakeResolver()
	r.target(webAuth, plainEndpoint(app))
	reg := prometheus.NewRegistry()
	_, addr := startProxy(t, testConfig(), Deps{Resolver: r, Metrics: metrics.New(reg)})
	c := proxyClient(t, addr)

	for range 3 { // keep-alive: the same client connection, the same pooled upstream one
		res, body := get(t, c, "http://web.shop.svc.cluster.local:8080/hello?x=1")
		if res.StatusCode != 200 || body != "web-1 HTTP/1.1" {
			t.Fatalf("got %d %q", res.StatusCode, body)
		}
		if h, p := res.Header.Get("X-Host"), res.Header.Get("X-Path"); h != "web.shop.svc.cluster.local:8080" || p != "/hello?x=1" {
			t.Errorf("the app saw Host %q and target %q", h, p)
		}
	}
	if n := r.resolved(webAuth); n != 1 {
		t.Errorf("resolved %d times, want once", n)
	}

	// The default port is 80, and names are normalised before they are resolved.
	r.target("api.shop.svc.cluster.local:80", plainEndpoint(app))
	if res, _ := get(t, c, "http://API.shop.svc.cluster.local./"); res.StatusCode != 200 {
		t.Errorf("default port: %d", res.StatusCode)
	}

	want := map[string]string{"direction": "outbound", "authority": webAuth, "tls": "no_identity", "dst_service": "web", "dst_namespace": "shop"}
	if n := proxytest.Gathered(t, reg, "request_total", want); n != 3 {
		t.Errorf("request_total%v = %v, want 3", want, n)
	}
	want["status_code"], want["classification"] = "200", "success"
	if n := proxytest.Gathered(t, reg, "response_total", want); n != 3 {
		t.Errorf("response_total%v = %v, want 3", want, n)
	}
	if n := proxytest.Gathered(t, reg, "tcp_open_total", map[string]string{"authority": webAuth}); n != 1 {
		t.Errorf("tcp_open_total = %v upstream connections, want 1 (pooled)", n)
	}
}

func TestExplicitConnect(t *testing.T) {
	echoAddr := startEcho(t)
	r := newFakeResolver()
	r.target("redis.shop.svc.cluster.local:6379", plainEndpoint(echoAddr))
	_, addr := startProxy(t, testConfig(), Deps{Resolver: r})

	// The tunnel's first bytes come with the request, as clients that pipeline do.
	c, br := send(t, addr, "CONNECT redis.shop.svc.cluster.local:6379 HTTP/1.1\r\nHost: redis.shop.svc.cluster.local:6379\r\n\r\nPING\r\n")
	res, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("CONNECT: %v %v", res, err)
	}
	if _, err := io.WriteString(c, "more\n"); err != nil {
		t.Fatal(err)
	}
	_ = c.(*net.TCPConn).CloseWrite() // the end of stream passes through; the echo then closes
	got, err := io.ReadAll(br)
	if err != nil || string(got) != "PING\r\nmore\n" {
		t.Fatalf("tunnel echoed %q, %v", got, err)
	}
}

func TestExplicitBadRequests(t *testing.T) {
	r := newFakeResolver()
	_, addr := startProxy(t, testConfig(), Deps{Resolver: r})
	for _, tc := range []struct{ req, status string }{
		{"GET https://web.shop.svc.cluster.local/ HTTP/1.1\r\nHost: x\r\n\r\n", "400"},
		{"GET / HTTP/1.1\r\n\r\n", "400"}, // no Host, no original destination
		{"CONNECT web.shop.svc.cluster.local HTTP/1.1\r\nHost: x\r\n\r\n", "400"},
		{"GET http://unknown.shop.svc.cluster.local/ HTTP/1.1\r\nHost: x\r\n\r\n", "503"}, // discovery fails
	} {
		c, br := send(t, addr, tc.req)
		line, err := br.ReadString('\n')
		_ = c.Close()
		if err != nil || !strings.HasPrefix(line, "HTTP/1.1 "+tc.status) {
			t.Errorf("%q: answered %q, %v; want %s", tc.req, line, err, tc.status)
		}
	}
}

func TestRouteErrorsAreProxyErrors(t *testing.T) {
	var he *httpproxy.Error
	o := &Outbound{suffixes: []string{"svc.cluster.local"}}
	req, _ := http.NewRequest(http.MethodGet, "ftp://x/", nil)
	req.RequestURI = "ftp://x/"
	if _, _, err := o.route(&clientConn{}, req); !errors.As(err, &he) || he.Status != 400 {
		t.Errorf("ftp:// routed: %v", err)
	}
}

// TestNoLoopToItself: a request whose target is the proxy's own outbound listener, by its
// address or by a name that is not the mesh's, is refused with a 502 rather than forwarded
// to the proxy again and again until it runs out of connections (linkerd2-proxy's
// PreventLoop); a CONNECT to it too.
func TestNoLoopToItself(t *testing.T) {
	r := newFakeResolver()
	_, addr := startProxy(t, testConfig(), Deps{Resolver: r})
	_, port, _ := net.SplitHostPort(addr)
	self := net.JoinHostPort("localhost", port)
	r.refuse(addr)
	r.refuse(self)
	c := proxyClient(t, addr)
	for _, target := range []string{addr, self} {
		res, body := get(t, c, "http://"+target+"/")
		if res.StatusCode != http.StatusBadGateway || !strings.Contains(body, "loop") {
			t.Errorf("GET http://%s/ through itself: %d %q, want 502 saying it would loop", target, res.StatusCode, body)
		}
	}
	conn := proxytest.Dial(t, addr)
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, "CONNECT "+addr+" HTTP/1.1\r\nHost: "+addr+"\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	if res, err := http.ReadResponse(bufio.NewReader(conn), nil); err != nil || res.StatusCode == http.StatusOK {
		t.Errorf("CONNECT to itself: %v %v, want a refusal", res, err)
	}
}

// TestNameOutsideTheMeshAskedByAddress: a name the destination refuses (a short name, an
// ExternalName) that resolves to a meshed pod's address is sent there as the address's
// discovery says, with its identity over mTLS, never in plaintext by name. Here the proxy has
// no TLS identity, so the meshed endpoint is refused rather than reached in plaintext.
func TestNameOutsideTheMeshAskedByAddress(t *testing.T) {
	app := startApp(t, "web")
	r := newFakeResolver()
	meshed := plainEndpoint(app)
	meshed.Identity = webID
	r.target(app.String(), meshed)
	self := net.JoinHostPort("localhost", strconv.Itoa(int(app.Port())))
	r.refuse(self)
	_, addr := startProxy(t, testConfig(), Deps{Resolver: r})
	c := proxyClient(t, addr)
	if res, body := get(t, c, "http://"+self+"/"); res.StatusCode != http.StatusBadGateway {
		t.Errorf("GET http://%s/ (%s, meshed): %d %q, want 502: never plaintext to a meshed pod", self, app, res.StatusCode, body)
	}
}
