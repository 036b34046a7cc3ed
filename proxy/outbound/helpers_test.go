package outbound

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meridian-mesh/meridian/internal/testutil"
	"github.com/meridian-mesh/meridian/proxy/discovery"
	"github.com/meridian-mesh/meridian/proxy/internal/proxytest"
)

func TestMain(m *testing.M) { os.Exit(testutil.Main(m, nil)) }

const (
	clientID = "client.shop.serviceaccount.identity.linkerd.cluster.local"
	webID    = "web.shop.serviceaccount.identity.linkerd.cluster.local"
	apiID    = "api.shop.serviceaccount.identity.linkerd.cluster.local"
	webAuth  = "web.shop.svc.cluster.local:8080"
)

// fakeResolver is the Resolver seam's test double: targets by authority, names it refuses,
// and errors.
type fakeResolver struct {
	mu       sync.Mutex
	targets  map[string]*fakeTarget
	notMesh  map[string]bool
	resolves map[string]int
}

func newFakeResolver() *fakeResolver {
	return &fakeResolver{targets: map[string]*fakeTarget{}, notMesh: map[string]bool{}, resolves: map[string]int{}}
}

func (r *fakeResolver) Resolve(ctx context.Context, authority string) (Target, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.resolves[authority]++
	if r.notMesh[authority] {
		return nil, fmt.Errorf("resolve %s: %w", authority, discovery.ErrNotMeshName)
	}
	t := r.targets[authority]
	if t == nil {
		return nil, fmt.Errorf("fake resolver: no target %s", authority)
	}
	t.held.Add(1)
	return t, nil
}

// target returns the fake target of authority, creating it with the given endpoints.
func (r *fakeResolver) target(authority string, eps ...discovery.Endpoint) *fakeTarget {
	r.mu.Lock()
	defer r.mu.Unlock()
	t := r.targets[authority]
	if t == nil {
		t = &fakeTarget{ch: make(chan struct{})}
		t.snap.Store(&discovery.Snapshot{Resolved: true, Exists: true})
		r.targets[authority] = t
	}
	t.set(eps...)
	return t
}

func (r *fakeResolver) refuse(authority string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.notMesh[authority] = true
}

func (r *fakeResolver) resolved(authority string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.resolves[authority]
}

type fakeTarget struct {
	mu   sync.Mutex
	snap atomic.Pointer[discovery.Snapshot]
	ch   chan struct{}
	held atomic.Int32 // Resolves minus Releases
}

func (t *fakeTarget) Snapshot() *discovery.Snapshot { return t.snap.Load() }

func (t *fakeTarget) Changed() <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.ch
}

func (t *fakeTarget) Release() { t.held.Add(-1) }

// set publishes a new snapshot with eps (profile unchanged).
func (t *fakeTarget) set(eps ...discovery.Endpoint) {
	t.update(func(s *discovery.Snapshot) { s.Endpoints = eps })
}

// update publishes a modified copy of the snapshot.
func (t *fakeTarget) update(change func(*discovery.Snapshot)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := *t.snap.Load()
	s.Version++
	change(&s)
	t.snap.Store(&s)
	close(t.ch)
	t.ch = make(chan struct{})
}

// plainEndpoint is an unmeshed endpoint at addr.
func plainEndpoint(addr netip.AddrPort) discovery.Endpoint {
	return discovery.Endpoint{Addr: addr, Weight: 10000, Labels: map[string]string{"service": "web", "namespace": "shop"}}
}

func addrPort(t testing.TB, a net.Addr) netip.AddrPort {
	t.Helper()
	ap, err := netip.ParseAddrPort(a.String())
	if err != nil {
		t.Fatal(err)
	}
	return ap
}

// testConfig is a configuration with short timeouts for tests.
func testConfig() Config {
	c := DefaultConfig()
	c.Grace = 2 * time.Second
	c.ConnectTimeout = 2 * time.Second
	return c
}

// startProxy runs an Outbound on a loopback listener until t ends and returns its address.
func startProxy(t testing.TB, cfg Config, deps Deps) (*Outbound, string) {
	t.Helper()
	o, err := New(cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	lis := testutil.Listen(t)
	testutil.Go(t, "outbound", func(ctx context.Context) error { return o.Serve(ctx, lis) })
	return o, lis.Addr().String()
}

// proxyTo runs a proxy (testConfig) whose resolver knows webAuth at eps until the test ends,
// and returns its address.
func proxyTo(t testing.TB, eps ...discovery.Endpoint) string {
	t.Helper()
	r := newFakeResolver()
	r.target(webAuth, eps...)
	_, addr := startProxy(t, testConfig(), Deps{Resolver: r})
	return addr
}

// proxyClient is an HTTP client that uses the proxy as an explicit HTTP proxy.
func proxyClient(t testing.TB, proxyAddr string) *http.Client {
	t.Helper()
	u, _ := url.Parse("http://" + proxyAddr)
	tr := &http.Transport{Proxy: http.ProxyURL(u), MaxIdleConnsPerHost: 16}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

// send dials the proxy at addr and writes raw; it returns the connection (its deadline 10 s
// away, closed when t ends) and a reader of what comes back.
func send(t testing.TB, addr, raw string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c := proxytest.Dial(t, addr)
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	return c, bufio.NewReader(c)
}

// connect opens a CONNECT tunnel to target through the proxy at addr: it returns the
// connection, a reader of what follows the answer, and the answer.
func connect(t testing.TB, addr, target string) (net.Conn, *bufio.Reader, *http.Response) {
	t.Helper()
	c, br := send(t, addr, "CONNECT "+target+" HTTP/1.1\r\nHost: "+target+"\r\n\r\n")
	res, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		t.Fatalf("CONNECT %s: %v", target, err)
	}
	return c, br, res
}

// startApp runs a plaintext application that answers with its name and returns its address.
func startApp(t testing.TB, name string) netip.AddrPort {
	t.Helper()
	lis := testutil.Listen(t)
	proxytest.ServeHTTP(t, lis, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-App", name)
		w.Header().Set("X-Host", r.Host)
		w.Header().Set("X-Path", r.URL.RequestURI())
		_, _ = fmt.Fprintf(w, "%s %s", name, r.Proto)
	}))
	return addrPort(t, lis.Addr())
}

// startEcho runs a TCP echo server and returns its address.
func startEcho(t testing.TB) netip.AddrPort {
	t.Helper()
	lis := testutil.Listen(t)
	testutil.ServeConns(t, lis, "the echo server", echo)
	return addrPort(t, lis.Addr())
}

// echo copies c back to itself until the client half-closes, then closes.
func echo(c net.Conn) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 4096)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			if _, werr := c.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
