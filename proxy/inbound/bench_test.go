package inbound

import (
	"context"
	"net"
	"net/http"
	"strconv"
	"testing"

	"github.com/meridian-mesh/meridian/internal/testutil"
	"github.com/meridian-mesh/meridian/proxy/internal/proxytest"
	"github.com/meridian-mesh/meridian/proxy/transportheader"
	"go.uber.org/zap"
)

// BenchmarkHTTP1 sends HTTP/1.1 requests over one keep-alive connection to an application
// on loopback: directly (the baseline), through the inbound proxy in plaintext, and through
// it with mTLS and the transport header, as a client proxy sends them. Allocations per
// request count the whole process (client, proxy and application); the proxy's share is
// the difference to "direct".
func BenchmarkHTTP1(b *testing.B) {
	lis := testutil.Listen(b)
	body := []byte("ok")
	proxytest.Serve(b, &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header()["Content-Length"] = []string{"2"}
		_, _ = w.Write(body)
	})}, lis)
	port := uint16(lis.Addr().(*net.TCPAddr).Port)
	pki := testutil.NewPKI(b)
	p := startProxy(b, Config{DefaultPort: port, Identity: serverID}, Deps{TLS: proxytest.TLS(b, pki, serverID), Logger: zap.NewNop()})

	direct := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	b.Cleanup(direct.CloseIdleConnections)
	for _, bc := range []struct {
		name string
		hc   *http.Client
		url  string
	}{
		{"direct", direct, "http://127.0.0.1:" + strconv.Itoa(int(port)) + "/"},
		{"inbound", client{proxy: p.addr}.httpClient(b, 0), "http://web/"},
		{"inbound-mtls-header", client{proxy: p.addr, tls: proxytest.TLS(b, pki, gatewayID)}.httpClient(b, port), "http://web/"},
	} {
		b.Run(bc.name, func(b *testing.B) { proxytest.BenchGet(b, bc.hc, bc.url) })
	}
}

// BenchmarkHTTP1Raw measures the inbound proxy alone on HTTP/1.1: a client writing fixed
// request bytes and reading each response with a bufio.Reader, and an application
// answering fixed bytes, neither of which allocates; so allocs/op are the proxy's own.
//
//	go test -run XXX -bench HTTP1Raw -benchmem ./proxy/inbound/
func BenchmarkHTTP1Raw(b *testing.B) {
	port := uint16(proxytest.RawServer(b, nil).Port)
	pki := testutil.NewPKI(b)
	p := startProxy(b, Config{DefaultPort: port, Identity: serverID}, Deps{TLS: proxytest.TLS(b, pki, serverID), Logger: zap.NewNop()})
	for _, bc := range []struct {
		name string
		c    client
		h    *transportheader.Header
	}{
		{"raw-plain", client{proxy: p.addr}, nil},
		{"raw-mtls-header", client{proxy: p.addr, tls: proxytest.TLS(b, pki, gatewayID)}, &transportheader.Header{Port: port, Protocol: transportheader.HTTP1}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			c, err := bc.c.dial(context.Background(), "http/1.1", bc.h)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			proxytest.BenchRaw(b, c, []byte("GET /x?y=1 HTTP/1.1\r\nHost: web.shop.svc.cluster.local:8080\r\nUser-Agent: bench\r\nAccept: */*\r\n\r\n"))
		})
	}
}
