package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/meridian-mesh/meridian/internal/testutil"
	"github.com/meridian-mesh/meridian/proxy/internal/proxytest"
	"github.com/meridian-mesh/meridian/proxy/internal/replicatest"
	"github.com/meridian-mesh/meridian/translator"
)

// loopbackMesh is the mesh on one machine: every pod a loopback address, its application
// on <pod ip>:<port>, its proxy's inbound on <pod ip>:4143, the destination in
// transport-header mode so that client proxies reach every meshed endpoint there.
type loopbackMesh struct {
	cluster *cluster
	cp      *controlPlane
	dest    *replica // the replica the proxies are configured with: not web's owner

	client      pod
	clientProxy *meshProxy
	c           *client

	web        service
	webApps    []*httpEcho
	webProxies []*meshProxy
	db         service
	dbProxy    *meshProxy
	vault      service
	vaultProxy *meshProxy
	empty      service
}

func startLoopbackMesh(t *testing.T) *loopbackMesh {
	t.Helper()
	pods := newPodNet()
	m := &loopbackMesh{cluster: &cluster{t: t, dir: t.TempDir()}}
	m.client = pods.pod("client", "", 0, 0)
	m.web = service{name: "web", port: 80}
	for i := range 3 {
		m.web.pods = append(m.web.pods, pods.pod("web", "", i, 8080))
	}
	m.db = service{name: "db", port: 5432, pods: []pod{pods.pod("db", "", 0, 5432)}}
	m.vault = service{name: "vault", port: 80, pods: []pod{pods.pod("vault", "", 0, 8080)}}
	m.empty = service{name: "empty", port: 80, targetPort: 8080, endpoints: []pod{}}
	for _, s := range []service{m.web, m.db, m.vault, m.empty} {
		m.cluster.service(s)
	}
	m.cluster.write("pod-client.yaml", podYAML(m.client))
	m.cluster.write("policy-vault.yaml", onlyFrom("vault", 8080, "ops"))

	m.cp = startControlPlane(t, m.cluster, cpOptions{replicas: 3, transportMode: translator.TransportHeader})
	webOwner := owner(m.cp.replicas, "web")
	for _, r := range m.cp.replicas {
		if r != webOwner {
			m.dest = r
			break
		}
	}
	for _, p := range m.web.pods {
		m.webApps = append(m.webApps, startHTTPEcho(t, p, nil))
		m.webProxies = append(m.webProxies, m.cp.startProxy(p, m.dest.addr))
	}
	startTCPEcho(t, m.db.pods[0], nil)
	m.dbProxy = m.cp.startProxy(m.db.pods[0], m.dest.addr)
	startHTTPEcho(t, m.vault.pods[0], nil)
	m.vaultProxy = m.cp.startProxy(m.vault.pods[0], m.dest.addr)
	m.clientProxy = m.cp.startProxy(m.client, m.dest.addr)
	m.c = newClient(t, m.client.outboundAddr())
	return m
}

func (m *loopbackMesh) url(s service) string { return "http://" + s.authority() + "/" }

// The data plane on one machine, end to end: two proxies (and more) in front of apps, with
// identity, a 3-replica destination ring in redirect mode and policy. The subtests share the
// mesh and run in order; the owner's kill comes late, and the endpoint removal after it
// shows that discovery follows the new owner.
func TestLoopbackMesh(t *testing.T) {
	m := startLoopbackMesh(t)
	t.Logf("pods on %s, the proxies ask %s, web is owned by %s", m.client.ip, m.dest.Name, owner(m.cp.replicas, "web").Name)
	t.Run("mTLS and the client identity", m.testMTLS)
	t.Run("HTTP2 through the transport header", m.testHTTP2)
	t.Run("opaque TCP through the transport header", m.testOpaque)
	t.Run("deny policy", m.testDeny)
	t.Run("NoEndpoints fails fast", m.testNoEndpoints)
	t.Run("an address outside the mesh goes direct", m.testDirect)
	t.Run("a slow endpoint gets fewer requests", m.testSlowEndpoint)
	t.Run("the owner killed mid-traffic", m.testOwnerKilled)
	t.Run("a removed endpoint gets no requests", m.testEndpointRemoved)
}

// A request reaches the app over mTLS, and the app sees the client's identity in
// l5d-client-id (never the one the client sent); every web endpoint is used; the server
// proxies count tls="true" with the client_id, the client proxy the server_id; the client
// proxy found web's owner through a redirect.
func (m *loopbackMesh) testMTLS(t *testing.T) {
	seen := map[string]bool{}
	testutil.EventuallyNoError(t, within, "every web endpoint to answer", func() error {
		code, r := m.c.mustGet(m.url(m.web), "l5d-client-id", "forged.identity")
		if code != http.StatusOK {
			return fmt.Errorf("status %d", code)
		}
		if r.ClientID != m.client.identity() || r.Proto != "HTTP/1.1" {
			t.Fatalf("%s saw l5d-client-id %q over %s, want %q over HTTP/1.1", r.Pod, r.ClientID, r.Proto, m.client.identity())
		}
		seen[r.Pod] = true
		if len(seen) < len(m.web.pods) {
			return fmt.Errorf("answered by %v", seen)
		}
		return nil
	})
	// A response is counted once its stream ended, which may be after the client read it.
	inbound := map[string]string{"direction": "inbound", "tls": "true", "client_id": m.client.identity()}
	outbound := map[string]string{"direction": "outbound", "tls": "true", "server_id": identityOf("web"), "status_code": "200", "authority": m.web.authority()}
	testutil.EventuallyNoError(t, within, "the proxies to count the requests", func() error {
		for i, px := range m.webProxies {
			if n := px.metric(t, "response_total", inbound); n < 1 {
				return fmt.Errorf("%s's proxy: response_total%v = %v, want at least 1", m.web.pods[i].name, inbound, n)
			}
		}
		if n := m.clientProxy.metric(t, "response_total", outbound); n < 3 {
			return fmt.Errorf("client proxy: response_total%v = %v, want at least 3", outbound, n)
		}
		return nil
	})
	var redirects float64
	for _, r := range m.cp.replicas {
		redirects += proxytest.Gathered(t, r.Reg, "destination_redirects_total", nil)
	}
	if redirects == 0 {
		t.Errorf("no replica redirected a stream; the proxies ask %s, which does not own web", m.dest.Name)
	}
}

// HTTP/2 with prior knowledge (as gRPC clients speak it) to the outbound listener, routed by
// its :authority: the transport header says HTTP/2, and the app gets HTTP/2 with the client's
// identity.
func (m *loopbackMesh) testHTTP2(t *testing.T) {
	var protocols http.Protocols
	protocols.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: &protocols, DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", m.client.outboundAddr())
	}}
	defer tr.CloseIdleConnections()
	h2 := &client{t: t, proxy: m.client.outboundAddr(), http: &http.Client{Transport: tr, Timeout: 10 * time.Second}}
	code, r := h2.mustGet(m.url(m.web))
	if code != http.StatusOK || r.Proto != "HTTP/2.0" || r.ClientID != m.client.identity() {
		t.Fatalf("HTTP/2 GET web = %d %+v; want 200, HTTP/2.0 at the app and l5d-client-id %s", code, r, m.client.identity())
	}
}

// An opaque TCP echo (Postgres' port, opaque by default) works through CONNECT and the
// transport header: the app listens only on <pod ip>:5432, the client proxy reaches the db
// proxy at 4143, and only the header names the port.
func (m *loopbackMesh) testOpaque(t *testing.T) {
	conn, br, err := m.c.connect(m.db.authority())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, line := range []string{"hello", "world"} {
		got, err := lineEcho(conn, br, line)
		if want := "db-0: " + line; err != nil || got != want {
			t.Fatalf("echo of %q = %q, %v; want %q", line, got, err, want)
		}
	}
	in := map[string]string{"direction": "inbound", "tls": "true", "client_id": m.client.identity()}
	if n := m.dbProxy.metric(t, "tcp_open_total", in); n < 1 {
		t.Errorf("db proxy: tcp_open_total%v = %v", in, n)
	}
	if n := m.dbProxy.metric(t, "inbound_tcp_authz_allow_total", nil); n < 1 {
		t.Errorf("db proxy: inbound_tcp_authz_allow_total = %v", n)
	}
	out := map[string]string{"direction": "outbound", "tls": "true", "server_id": identityOf("db")}
	if n := m.clientProxy.metric(t, "tcp_open_total", out); n < 1 {
		t.Errorf("client proxy: tcp_open_total%v = %v", out, n)
	}
}

// A Server admitting only the ops ServiceAccount answers the client with 403 and counts the
// deny. This depends on the client proxy dialling from its pod address: from 127.0.0.1
// Linkerd's inbound policy always allows.
func (m *loopbackMesh) testDeny(t *testing.T) {
	testutil.EventuallyNoError(t, within, "vault to answer", func() error {
		code, r := m.c.mustGet(m.url(m.vault))
		switch code {
		case http.StatusForbidden:
			return nil
		case http.StatusServiceUnavailable: // the first resolution took longer than 3 s
			return fmt.Errorf("503 %q", r.Remote)
		}
		t.Fatalf("GET vault = %d %q, want 403", code, r.Remote)
		return nil
	})
	deny := map[string]string{"direction": "inbound", "srv_name": "vault-http", "client_id": m.client.identity(), "tls": "true"}
	if n := m.vaultProxy.metric(t, "inbound_http_authz_deny_total", deny); n != 1 {
		t.Errorf("vault proxy: inbound_http_authz_deny_total%v = %v, want 1", deny, n)
	}
	if n := m.vaultProxy.metric(t, "inbound_http_authz_allow_total", nil); n != 0 {
		t.Errorf("vault proxy: inbound_http_authz_allow_total = %v, want 0", n)
	}
}

// A service without endpoints: 503, from the client proxy (no timeout: the status says it).
func (m *loopbackMesh) testNoEndpoints(t *testing.T) {
	code, r := m.c.mustGet(m.url(m.empty))
	if code != http.StatusServiceUnavailable || !strings.Contains(r.Remote, "no endpoints") {
		t.Fatalf("GET empty = %d %q, want 503 saying no endpoints", code, r.Remote)
	}
}

// An authority the destination does not know (an IP address: InvalidArgument, "not a mesh
// name") goes to that address unproxied, in plaintext: on loopback and, from a proxy whose
// pod is a loopback address, to the host's other addresses too.
func (m *loopbackMesh) testDirect(t *testing.T) {
	addrs := []string{netip.AddrFrom4([4]byte{127, m.client.ip.As4()[1], 200, 1}).String()}
	if ip := hostAddr(); ip.IsValid() {
		addrs = append(addrs, ip.String())
	} else {
		t.Log("no non-loopback IPv4 address on this host: the direct path is checked on loopback only")
	}
	for _, host := range addrs {
		ext := pod{name: "outside-" + host, ip: netip.MustParseAddr(host), port: 0}
		lis := listenOn(t, net.JoinHostPort(host, "0"))
		startHTTPEcho(t, ext, lis)
		code, r := m.c.mustGet("http://" + lis.Addr().String() + "/")
		if code != http.StatusOK || r.Pod != ext.name || r.ClientID != "" {
			t.Errorf("GET %s through the client proxy = %d %+v; want 200 from %s without l5d-client-id", lis.Addr(), code, r, ext.name)
		}
	}
}

// hostAddr is one of the host's IPv4 addresses outside loopback, if it has one.
func hostAddr() netip.Addr {
	ifs, err := net.InterfaceAddrs()
	if err != nil {
		return netip.Addr{}
	}
	for _, a := range ifs {
		if p, err := netip.ParsePrefix(a.String()); err == nil && p.Addr().Is4() && !p.Addr().IsLoopback() && !p.Addr().IsLinkLocalUnicast() {
			return p.Addr()
		}
	}
	return netip.Addr{}
}

// P2C over peak-EWMA latency: an endpoint that answers 1 s late gets far fewer than its
// third of sequential requests. (The delay is far above what a loaded machine adds: the
// peak of a slow handshake decays over 10 s, and an endpoint that had one stays the costlier
// of a pair for that long.)
func (m *loopbackMesh) testSlowEndpoint(t *testing.T) {
	const n = 90
	slow := m.webApps[2]
	slow.Delay.Store(int64(time.Second))
	defer slow.Delay.Store(0)
	counts := m.count(t, n)
	t.Logf("requests per endpoint with %s slow: %v", slow.pod.name, counts)
	if got := counts[slow.pod.name]; got > n/6 {
		t.Errorf("the slow endpoint got %d of %d requests, want at most %d (a third is %d)", got, n, n/6, n/3)
	}
}

// count sends n requests to web and returns how many each pod answered.
func (m *loopbackMesh) count(t *testing.T, n int) map[string]int {
	t.Helper()
	counts := map[string]int{}
	for range n {
		code, r := m.c.mustGet(m.url(m.web))
		if code != http.StatusOK {
			t.Fatalf("GET web = %d", code)
		}
		counts[r.Pod]++
	}
	return counts
}

// Killing the replica that owns web while 50 requests a second flow fails none: the
// endpoints are cached, and the proxy re-resolves at the new owner. (The client proxy drops
// idle targets after 1 s, so once the traffic flows web's is the only Get stream.)
func (m *loopbackMesh) testOwnerKilled(t *testing.T) {
	killed := owner(m.cp.replicas, "web")
	survivors := slices.DeleteFunc(slices.Clone(m.cp.replicas), func(r *replica) bool { return r == killed })
	tr := startTraffic(m.c, m.url(m.web), 20*time.Millisecond)
	streamsAt := func(at *replica, among []*replica) error {
		total := 0.0
		for _, r := range among {
			total += r.GetStreams(t)
		}
		if n := at.GetStreams(t); n != 1 || total != 1 {
			return fmt.Errorf("%s serves %v Get streams, the replicas %v", at.Name, n, total)
		}
		return nil
	}
	testutil.EventuallyNoError(t, within, "web's stream alone, at its owner "+killed.Name, func() error { return streamsAt(killed, m.cp.replicas) })
	testutil.Eventually(t, within, "traffic to flow", func() bool { return tr.sent.Load() >= 25 })
	killed.Kill()
	replicatest.WaitRing(t, survivors)
	newOwner := owner(survivors, "web")
	testutil.EventuallyNoError(t, within, "the proxy to stream web from the new owner "+newOwner.Name, func() error { return streamsAt(newOwner, survivors) })
	after := tr.sent.Load()
	testutil.Eventually(t, within, "traffic to go on", func() bool { return tr.sent.Load() >= after+50 })
	outcomes := tr.end(t)
	failed := 0
	for _, o := range outcomes {
		if o.err != nil || o.status != http.StatusOK {
			failed++
			t.Errorf("request failed: status %d, %v", o.status, o.err)
		}
	}
	t.Logf("%s killed, %s owns web now; %d requests, %d failed", killed.Name, newOwner.Name, len(outcomes), failed)
	m.cp.replicas = survivors
}

// An endpoint removed from the EndpointSlice (its app still up) stops getting requests, once
// the destination has sent the Remove. The others answer 5 ms late, so that P2C prefers the
// one removed while it is there: a batch of requests none of which reaches it confirms the
// removal arrived.
func (m *loopbackMesh) testEndpointRemoved(t *testing.T) {
	gone := m.web.pods[1]
	for _, i := range []int{0, 2} {
		m.webApps[i].Delay.Store(int64(5 * time.Millisecond))
		defer m.webApps[i].Delay.Store(0)
	}
	removes := func() float64 {
		sum := 0.0
		for _, r := range m.cp.replicas {
			sum += proxytest.Gathered(t, r.Reg, "destination_updates_sent_total", map[string]string{"kind": "remove"})
		}
		return sum
	}
	before := removes()
	s := m.web
	s.endpoints = []pod{m.web.pods[0], m.web.pods[2]}
	m.cluster.service(s)
	testutil.Eventually(t, within, "the destination to send the removal", func() bool { return removes() > before })
	testutil.EventuallyNoError(t, within, "requests to stop reaching "+gone.name, func() error {
		if c := m.count(t, 10); c[gone.name] > 0 {
			return fmt.Errorf("%v", c)
		}
		return nil
	})
	counts := m.count(t, 60)
	if counts[gone.name] != 0 {
		t.Fatalf("after %s left: %v", gone.name, counts)
	}
}
