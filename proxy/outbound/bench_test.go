package outbound

import (
	"net"
	"net/http"
	"net/netip"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/meridian-mesh/meridian/internal/testutil"
	"github.com/meridian-mesh/meridian/proxy/discovery"
	"github.com/meridian-mesh/meridian/proxy/internal/proxytest"
	"github.com/meridian-mesh/meridian/proxy/metrics"
	"github.com/meridian-mesh/meridian/proxy/transportheader"
)

// The benchmarks run a client, the outbound proxy and the server in one process over
// loopback, so ns/op and allocs/op include the client's and the server's share: the "direct"
// case (client to server, no proxy) is the baseline to subtract. "plain" forwards to an
// unmeshed application, "mtls" to a meshed one through a stub inbound proxy (TLS 1.3 with
// ALPN transport.l5d.io/v1 and the transport header, then HTTP on the same connection).
// BenchmarkOutboundHTTP1's "raw" cases use a client and a server that allocate nothing, so
// their allocs/op are the proxy's own.
//
//	go test -run XXX -bench Outbound -benchmem ./proxy/outbound/
func BenchmarkOutboundHTTP1(b *testing.B) {
	benchOutbound(b, false)
	benchRaw(b)
}

// BenchmarkOutboundHTTP2 is the same with HTTP/2 (prior knowledge from the client, HTTP/2
// upstream: gRPC's path).
func BenchmarkOutboundHTTP2(b *testing.B) { benchOutbound(b, true) }

func benchOutbound(b *testing.B, h2 bool) {
	p := testutil.NewPKI(b)
	app := startApp(b, "web-1")
	stub := startInbound(b, p, webID, "web-1")
	client := func(addr string) *http.Client {
		if h2 {
			return h2Client(b, addr)
		}
		return proxyClient(b, addr)
	}
	b.Run("direct", func(b *testing.B) {
		c := client(app.String())
		if !h2 {
			c = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
			b.Cleanup(c.Transport.(*http.Transport).CloseIdleConnections)
		}
		proxytest.BenchGet(b, c, "http://"+app.String()+"/")
	})
	for _, name := range []string{"plain", "mtls"} {
		b.Run(name, func(b *testing.B) {
			r := newFakeResolver()
			if name == "plain" {
				r.target(webAuth, plainEndpoint(app))
			} else {
				r.target(webAuth, stub.endpoint(webID, 8080, true))
			}
			deps := Deps{Resolver: r, TLS: proxytest.TLS(b, p, clientID), Metrics: metrics.New(prometheus.NewRegistry()), Log: zap.NewNop()}
			_, addr := startProxy(b, testConfig(), deps)
			proxytest.BenchGet(b, client(addr), "http://"+webAuth+"/")
		})
	}
}

// benchRaw measures the proxy alone on HTTP/1.1: a client writing fixed request bytes and
// reading the response with a bufio.Reader, and upstreams answering fixed bytes.
func benchRaw(b *testing.B) {
	p := testutil.NewPKI(b)
	plain := proxytest.RawServer(b, nil)
	meshed := proxytest.RawServer(b, proxytest.TLS(b, p, webID).Server(transportheader.ALPN))
	for _, tc := range []struct {
		name string
		ep   discovery.Endpoint
	}{
		{"raw-plain", plainEndpoint(addrPort(b, plain))},
		{"raw-mtls", discovery.Endpoint{Addr: netip.AddrPortFrom(addrPort(b, meshed).Addr(), 8080), Identity: webID, OpaqueTransportPort: uint16(meshed.Port)}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			r := newFakeResolver()
			r.target(webAuth, tc.ep)
			_, addr := startProxy(b, testConfig(), Deps{Resolver: r, TLS: proxytest.TLS(b, p, clientID), Log: zap.NewNop()})
			c, err := net.Dial("tcp", addr)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			proxytest.BenchRaw(b, c, []byte("GET http://"+webAuth+"/ HTTP/1.1\r\nHost: "+webAuth+"\r\nUser-Agent: bench\r\nAccept: */*\r\n\r\n"))
		})
	}
}
