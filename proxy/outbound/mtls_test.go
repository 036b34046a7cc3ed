package outbound

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/meridian-mesh/meridian/internal/testutil"
	"github.com/meridian-mesh/meridian/proxy/internal/proxytest"
	"github.com/meridian-mesh/meridian/proxy/metrics"
	"github.com/meridian-mesh/meridian/proxy/transportheader"
)

// h2Client speaks HTTP/2 with prior knowledge to addr, whatever the request URL says: a
// client of the explicit proxy that routes by :authority.
func h2Client(t testing.TB, addr string) *http.Client {
	t.Helper()
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: &p, DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", addr)
	}}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

func TestMeshedOpaqueTransport(t *testing.T) {
	p := testutil.NewPKI(t)
	stub := startInbound(t, p, webID, "web-1")
	r := newFakeResolver()
	r.target(webAuth, stub.endpoint(webID, 8080, true))
	reg := prometheus.NewRegistry()
	_, addr := startProxy(t, testConfig(), Deps{Resolver: r, TLS: proxytest.TLS(t, p, clientID), Metrics: metrics.New(reg)})

	res, body := get(t, proxyClient(t, addr), "http://"+webAuth+"/")
	if res.StatusCode != 200 || body != "web-1 HTTP/1.1" {
		t.Fatalf("HTTP/1: %d %q", res.StatusCode, body)
	}
	if id, port := res.Header.Get("X-Client-Id"), res.Header.Get("X-Header-Port"); id != clientID || port != "8080" {
		t.Errorf("the inbound saw client %q and header port %q", id, port)
	}

	// HTTP/2 from the client: HTTP/2 with the header saying so; trailers come back.
	res, body = get(t, h2Client(t, addr), "http://"+webAuth+"/", "Content-Type", "application/grpc", "Te", "trailers")
	if res.StatusCode != 200 || res.Trailer.Get("Grpc-Status") != "0" || len(body) != 5 {
		t.Fatalf("HTTP/2: %d, trailers %v, %d body bytes", res.StatusCode, res.Trailer, len(body))
	}

	hdrs, clients, alpns, failed := stub.seen()
	want := []transportheader.Header{{Port: 8080, Protocol: transportheader.HTTP1}, {Port: 8080, Protocol: transportheader.HTTP2}}
	if !slices.Equal(hdrs, want) || failed != 0 {
		t.Errorf("transport headers %v (failed %d), want %v", hdrs, failed, want)
	}
	for i := range clients {
		if clients[i] != clientID || alpns[i] != transportheader.ALPN {
			t.Errorf("connection %d: client %q, ALPN %q", i, clients[i], alpns[i])
		}
	}
	labels := map[string]string{"authority": webAuth, "tls": "true", "server_id": webID, "dst_pod": "web-1"}
	if n := proxytest.Gathered(t, reg, "response_total", labels); n != 2 {
		t.Errorf("response_total%v = %v, want 2", labels, n)
	}
	if n := proxytest.Gathered(t, reg, "response_total", map[string]string{"grpc_status": "0"}); n != 1 {
		t.Errorf("grpc responses = %v, want 1", n)
	}
}

func TestMeshedOpaqueTransportTCP(t *testing.T) {
	p := testutil.NewPKI(t)
	stub := startInbound(t, p, webID, "web-1")
	r := newFakeResolver()
	r.target("db.shop.svc.cluster.local:5432", stub.endpoint(webID, 5432, true))
	_, addr := startProxy(t, testConfig(), Deps{Resolver: r, TLS: proxytest.TLS(t, p, clientID)})

	got := connectEcho(t, addr, "db.shop.svc.cluster.local:5432", "\x00\x00\x00\x08binary")
	if got != "\x00\x00\x00\x08binary" {
		t.Fatalf("echo through the opaque transport: %q", got)
	}
	hdrs, clients, _, _ := stub.seen()
	if len(hdrs) != 1 || hdrs[0] != (transportheader.Header{Port: 5432, Protocol: transportheader.Opaque}) || clients[0] != clientID {
		t.Errorf("headers %v, clients %v", hdrs, clients)
	}
}

// connectEcho opens a CONNECT tunnel to target through the proxy, sends msg, half-closes and
// returns what came back.
func connectEcho(t testing.TB, proxyAddr, target, msg string) string {
	t.Helper()
	c, br, res := connect(t, proxyAddr, target)
	defer c.Close()
	if res.StatusCode != 200 {
		t.Fatalf("CONNECT %s: %s", target, res.Status)
	}
	_, _ = io.WriteString(c, msg)
	_ = c.(*net.TCPConn).CloseWrite()
	b, err := io.ReadAll(br)
	if err != nil {
		t.Fatalf("tunnel read: %v", err)
	}
	return string(b)
}

func TestMeshedDirectTLS(t *testing.T) {
	// Without an opaque-transport port: TLS to the endpoint's own port, ALPN by protocol,
	// no header.
	p := testutil.NewPKI(t)
	stub := startInbound(t, p, webID, "web-1")
	r := newFakeResolver()
	r.target(webAuth, stub.endpoint(webID, 0, false))
	_, addr := startProxy(t, testConfig(), Deps{Resolver: r, TLS: proxytest.TLS(t, p, clientID)})

	if res, body := get(t, proxyClient(t, addr), "http://"+webAuth+"/"); res.StatusCode != 200 || body != "web-1 HTTP/1.1" {
		t.Fatalf("HTTP/1: %d %q", res.StatusCode, body)
	}
	if res, body := get(t, h2Client(t, addr), "http://"+webAuth+"/"); res.StatusCode != 200 || body != "web-1 HTTP/2.0" {
		t.Fatalf("HTTP/2: %d %q", res.StatusCode, body)
	}
	hdrs, clients, alpns, _ := stub.seen()
	if len(hdrs) != 0 || !slices.Equal(alpns, []string{"http/1.1", "h2"}) || !slices.Equal(clients, []string{clientID, clientID}) {
		t.Errorf("headers %v, ALPNs %v, clients %v", hdrs, alpns, clients)
	}
}

func TestMeshedIdentityIsVerified(t *testing.T) {
	p := testutil.NewPKI(t)
	impostor := startInbound(t, p, apiID, "api-1") // discovery says web, the peer proves api
	r := newFakeResolver()
	r.target(webAuth, impostor.endpoint(webID, 8080, true))
	r.target("db.shop.svc.cluster.local:5432", impostor.endpoint(webID, 5432, true))
	_, addr := startProxy(t, testConfig(), Deps{Resolver: r, TLS: proxytest.TLS(t, p, clientID)})

	res, _ := get(t, proxyClient(t, addr), "http://"+webAuth+"/")
	if res.StatusCode != http.StatusBadGateway || res.Header.Get("L5d-Proxy-Error") == "" {
		t.Errorf("a peer with another identity: %d %q, want 502", res.StatusCode, res.Header.Get("L5d-Proxy-Error"))
	}
	if code := connectStatus(t, addr, "db.shop.svc.cluster.local:5432"); code != http.StatusBadGateway {
		t.Errorf("CONNECT to a peer with another identity: %d, want 502", code)
	}
	testutil.Eventually(t, 10*time.Second, "the impostor to see its handshakes fail", func() bool {
		_, _, _, failed := impostor.seen()
		return failed > 0
	})

	// Another trust root: refused as well.
	stranger := startInbound(t, testutil.NewPKI(t), webID, "web-x")
	r.target(webAuth, stranger.endpoint(webID, 8080, true))
	res, _ = waitStatus(t, proxyClient(t, addr), "http://"+webAuth+"/", http.StatusBadGateway)
	if res.StatusCode != http.StatusBadGateway {
		t.Errorf("a peer from another root: %d", res.StatusCode)
	}

	// No TLS identity of our own: meshed endpoints are refused, never sent plaintext.
	_, bare := startProxy(t, testConfig(), Deps{Resolver: r})
	if res, _ := get(t, proxyClient(t, bare), "http://"+webAuth+"/"); res.StatusCode != http.StatusBadGateway {
		t.Errorf("meshed endpoint without a TLS identity: %d", res.StatusCode)
	}
}

// connectStatus sends CONNECT target and returns the answer's status.
func connectStatus(t testing.TB, proxyAddr, target string) int {
	t.Helper()
	c, _, res := connect(t, proxyAddr, target)
	_ = c.Close()
	return res.StatusCode
}

// waitStatus repeats a GET until it answers status (a snapshot change is applied
// asynchronously) and returns the last answer.
func waitStatus(t testing.TB, c *http.Client, url string, status int) (*http.Response, string) {
	t.Helper()
	var res *http.Response
	var body string
	testutil.Eventually(t, 10*time.Second, fmt.Sprintf("GET %s to answer %d", url, status), func() bool {
		res, body = get(t, c, url)
		return res.StatusCode == status
	})
	return res, body
}
