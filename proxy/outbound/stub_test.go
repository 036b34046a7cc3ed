package outbound

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/meridian-mesh/meridian/internal/testutil"
	"github.com/meridian-mesh/meridian/internal/tlsid"
	"github.com/meridian-mesh/meridian/proxy/discovery"
	"github.com/meridian-mesh/meridian/proxy/internal/handoff"
	"github.com/meridian-mesh/meridian/proxy/internal/proxytest"
	"github.com/meridian-mesh/meridian/proxy/transportheader"
)

// inboundStub is a meshed pod's inbound proxy as far as outbound needs one: it terminates
// TLS with its identity, reads the transport header when the ALPN says so, and serves HTTP
// (HTTP/1 or HTTP/2) or echoes an opaque session, recording what it saw.
type inboundStub struct {
	name string
	addr netip.AddrPort

	mu      sync.Mutex
	headers []transportheader.Header
	clients []string // the verified client identities
	alpns   []string
	failed  int // handshakes or headers that failed
}

type stubConn struct {
	net.Conn
	client string
	port   uint16
}

type stubConnKey struct{}

// startInbound runs a stub with the given identity until t ends.
func startInbound(t testing.TB, p *testutil.PKI, identity, name string) *inboundStub {
	t.Helper()
	s := &inboundStub{name: name}
	lis := testutil.Listen(t)
	s.addr = addrPort(t, lis.Addr())
	cfg := proxytest.TLS(t, p, identity).Server(transportheader.ALPN, "h2", "http/1.1")

	hl := handoff.New(lis.Addr())
	var pr http.Protocols
	pr.SetHTTP1(true)
	pr.SetUnencryptedHTTP2(true)
	srv := &http.Server{Protocols: &pr, Handler: http.HandlerFunc(s.serve), ReadHeaderTimeout: 10 * time.Second,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context { return context.WithValue(ctx, stubConnKey{}, c) }}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		_ = srv.Serve(hl)
	}()
	go func() {
		defer wg.Done()
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				s.handle(c, cfg, hl)
			}()
		}
	}()
	t.Cleanup(func() {
		_ = lis.Close()
		_ = srv.Close()
		testutil.Wait(t, testutil.StopWithin, "the inbound stub", wg.Wait)
	})
	return s
}

func (s *inboundStub) handle(c net.Conn, cfg *tls.Config, hl *handoff.Listener) {
	tc := tls.Server(c, cfg)
	_ = tc.SetDeadline(time.Now().Add(5 * time.Second))
	if err := tc.Handshake(); err != nil {
		s.fail()
		_ = c.Close()
		return
	}
	cs := tc.ConnectionState()
	id, _ := tlsid.PeerIdentity(cs)
	proto := map[string]transportheader.SessionProtocol{"h2": transportheader.HTTP2, "http/1.1": transportheader.HTTP1}[cs.NegotiatedProtocol]
	var port uint16
	if cs.NegotiatedProtocol == transportheader.ALPN {
		h, err := transportheader.Read(tc)
		if err != nil {
			s.fail()
			_ = c.Close()
			return
		}
		s.mu.Lock()
		s.headers = append(s.headers, h)
		s.mu.Unlock()
		proto, port = h.Protocol, h.Port
	}
	_ = tc.SetDeadline(time.Time{})
	s.mu.Lock()
	s.clients = append(s.clients, id)
	s.alpns = append(s.alpns, cs.NegotiatedProtocol)
	s.mu.Unlock()
	if proto == transportheader.Opaque {
		echo(tc)
		return
	}
	if !hl.Handoff(&stubConn{Conn: tc, client: id, port: port}) {
		_ = tc.Close()
	}
}

func (s *inboundStub) serve(w http.ResponseWriter, r *http.Request) {
	sc, _ := r.Context().Value(stubConnKey{}).(*stubConn)
	w.Header().Set("X-App", s.name)
	w.Header().Set("X-Host", r.Host)
	if sc != nil {
		w.Header().Set("X-Client-Id", sc.client)
		w.Header().Set("X-Header-Port", strconv.Itoa(int(sc.port)))
	}
	if r.Header.Get("Content-Type") == "application/grpc" {
		w.Header().Set("Trailer", "Grpc-Status")
		w.Header().Set("Content-Type", "application/grpc")
		_, _ = w.Write([]byte{0, 0, 0, 0, 0})
		w.Header().Set("Grpc-Status", "0")
		return
	}
	_, _ = fmt.Fprintf(w, "%s %s", s.name, r.Proto)
}

func (s *inboundStub) fail() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failed++
}

func (s *inboundStub) seen() (headers []transportheader.Header, clients, alpns []string, failed int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]transportheader.Header(nil), s.headers...), append([]string(nil), s.clients...),
		append([]string(nil), s.alpns...), s.failed
}

// meshedEndpoint is an endpoint of a meshed pod whose application port is appPort and whose
// inbound proxy (the stub) takes the opaque transport; with opaque false the stub is the
// endpoint's address itself (TLS straight to the port, no header).
func (s *inboundStub) endpoint(identity string, appPort uint16, opaque bool) discovery.Endpoint {
	e := discovery.Endpoint{Addr: s.addr, Weight: 10000, Identity: identity,
		Labels: map[string]string{"service": "web", "namespace": "shop", "pod": s.name}}
	if opaque {
		e.Addr = netip.AddrPortFrom(s.addr.Addr(), appPort)
		e.OpaqueTransportPort = s.addr.Port()
	}
	return e
}
