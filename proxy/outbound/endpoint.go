package outbound

import (
	"context"
	"crypto/tls"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/meridian-mesh/meridian/proxy/discovery"
	"github.com/meridian-mesh/meridian/proxy/h1"
	"github.com/meridian-mesh/meridian/proxy/h2"
	"github.com/meridian-mesh/meridian/proxy/metrics"
	"github.com/meridian-mesh/meridian/proxy/transportheader"
)

// endpoint is one address of a target with everything the proxy keeps for it: how to connect
// (address, TLS configurations, transport headers), its connection pools and its metric
// handles. It never changes after construction (the pools change inside); an endpoint whose
// discovery data changes is replaced by a new one. The target's two balancers share it.
type endpoint struct {
	o         *Outbound
	authority string             // the target's
	disc      discovery.Endpoint // Addr is zero for a direct target
	// urlHost is the host:port of the requests' URL: the endpoint's address, or a direct
	// target's authority.
	urlHost string
	// dialAddr is where connections go: urlHost, or ip:OpaqueTransportPort.
	dialAddr string
	// tls and header are indexed by session protocol: the client configuration (nil: plain)
	// and the encoded transport header (nil: none).
	tls    [3]*tls.Config
	header [3][]byte
	route  *metrics.Route
	tcp    *metrics.TCP
	// h1 pools keep-alive HTTP/1.1 connections, h2 multiplexed HTTP/2 ones (prior
	// knowledge over whatever dial gives: plaintext, TLS, or TLS after a transport header).
	h1, h2 *http.Transport
	// lean pools the lean HTTP/1.1 path's connections (h1conn.go); h1 serves the requests
	// that path hands to net/http.
	lean h1.Pool
	// leanH2 pools the lean HTTP/2 relay's multiplexed connections (h2conn.go).
	leanH2  h2.Pool
	retired atomic.Bool
}

var protocols = [...]transportheader.SessionProtocol{transportheader.Opaque, transportheader.HTTP1, transportheader.HTTP2}

// newEndpoint builds the endpoint for discovery's d of the target authority.
func newEndpoint(o *Outbound, authority string, d discovery.Endpoint) *endpoint {
	e := &endpoint{o: o, authority: authority, disc: d, urlHost: d.Addr.String()}
	e.dialAddr = e.urlHost
	labels := metrics.Labels{Direction: "outbound", Authority: authority, TLS: metrics.TLSNoIdentity, Dst: d.Labels}
	if d.Identity != "" {
		labels.TLS, labels.ServerID = metrics.TLSTrue, d.Identity
		e.tlsConfigs(d)
	}
	e.route, e.tcp = o.metrics.Route(labels), o.metrics.TCP(labels)
	e.h1, e.h2 = e.transport(transportheader.HTTP1), e.transport(transportheader.HTTP2)
	return e
}

// newDirect builds the endpoint of a target discovery refused: plaintext to the authority
// itself (a name is resolved by the dialer).
func newDirect(o *Outbound, authority string) *endpoint {
	e := &endpoint{o: o, authority: authority, urlHost: authority, dialAddr: authority}
	labels := metrics.Labels{Direction: "outbound", Authority: authority, TLS: metrics.TLSNoIdentity}
	e.route, e.tcp = o.metrics.Route(labels), o.metrics.TCP(labels)
	e.h1, e.h2 = e.transport(transportheader.HTTP1), e.transport(transportheader.HTTP2)
	return e
}

// tlsConfigs prepares the TLS of a meshed endpoint; without a TLS identity they stay nil and
// dial refuses the endpoint.
func (e *endpoint) tlsConfigs(d discovery.Endpoint) {
	id := e.o.tls
	if id == nil {
		return
	}
	if d.OpaqueTransportPort != 0 {
		e.dialAddr = netip.AddrPortFrom(d.Addr.Addr(), d.OpaqueTransportPort).String()
		for _, p := range protocols {
			e.tls[p] = id.Client(d.Identity, transportheader.ALPN)
			e.header[p] = transportheader.Encode(transportheader.Header{Port: d.Addr.Port(), Protocol: p})
		}
		return
	}
	e.tls[transportheader.Opaque] = id.Client(d.Identity)
	e.tls[transportheader.HTTP1] = id.Client(d.Identity, "http/1.1")
	e.tls[transportheader.HTTP2] = id.Client(d.Identity, "h2")
}

// transport returns the pool of connections of one HTTP version to the endpoint.
func (e *endpoint) transport(proto transportheader.SessionProtocol) *http.Transport {
	var p http.Protocols
	if proto == transportheader.HTTP2 {
		p.SetUnencryptedHTTP2(true)
	} else {
		p.SetHTTP1(true)
	}
	return &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return e.dial(ctx, proto)
		},
		Protocols:              &p,
		MaxIdleConnsPerHost:    e.o.cfg.MaxIdlePerEndpoint,
		IdleConnTimeout:        e.o.cfg.PoolIdleTimeout,
		DisableCompression:     true, // pass the client's Accept-Encoding and the body through as they are
		ExpectContinueTimeout:  time.Second,
		MaxResponseHeaderBytes: int64(e.o.cfg.MaxHeaderBytes),
	}
}

// pool returns the transport for a request of HTTP major version major.
func (e *endpoint) pool(major int) *http.Transport {
	if major == 2 {
		return e.h2
	}
	return e.h1
}

// retire closes the idle connections of an endpoint that left its target; requests in flight
// on it finish, and their connections are closed as they end (see afterRequest).
func (e *endpoint) retire() {
	e.retired.Store(true)
	e.lean.CloseIdle(true)
	e.leanH2.CloseIdle(time.Now().Add(time.Hour), true)
	e.closeIdle()
}

// afterRequest closes the pools' idle connections again once a request on a retired
// endpoint ended, so that no connection to it outlives its last request.
func (e *endpoint) afterRequest() {
	if e.retired.Load() {
		e.closeIdle()
	}
}

func (e *endpoint) closeIdle() {
	e.h1.CloseIdleConnections()
	e.h2.CloseIdleConnections()
	if e.retired.Load() {
		e.leanH2.CloseIdle(time.Now().Add(time.Hour), true)
	}
}

// sameEndpoint reports whether b can keep a's endpoint state: everything but the weight,
// which the balancer updates in place, is the same.
func sameEndpoint(a, b discovery.Endpoint) bool {
	return a.Addr == b.Addr && a.Identity == b.Identity && a.Hint == b.Hint &&
		a.OpaqueTransportPort == b.OpaqueTransportPort && maps.Equal(a.Labels, b.Labels)
}
