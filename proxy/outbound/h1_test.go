package outbound

import (
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meridian-mesh/meridian/internal/testutil"
	"github.com/meridian-mesh/meridian/proxy/h1"
	"github.com/meridian-mesh/meridian/proxy/internal/proxytest"
)

// rawExchange writes raw to a new connection to the proxy and reads n responses.
func rawExchange(t testing.TB, addr, raw string, n int, method string) []*http.Response {
	t.Helper()
	return proxytest.Exchange(t, proxytest.Dial(t, addr), raw, n, method)
}

// TestLeanResponseFramings: chunked bodies with extensions and trailers, interim responses,
// 204, HEAD, hop-by-hop fields and a body delimited by the connection's close all reach
// the client as the application sent them.
func TestLeanResponseFramings(t *testing.T) {
	srv := proxytest.StartScripted(t, proxytest.ResponseFramings)
	addr := proxyTo(t, plainEndpoint(addrPort(t, srv.Addr)))
	proxytest.CheckResponseFramings(t, func() net.Conn { return proxytest.Dial(t, addr) },
		"GET http://"+webAuth+"/ HTTP/1.1\r\nHost: "+webAuth+"\r\n\r\n", "HEAD http://"+webAuth+"/ HTTP/1.1\r\nHost: x\r\n\r\n")
}

func TestLeanRequestForwarding(t *testing.T) {
	srv := proxytest.StartScripted(t, func(int64, string) (string, bool) { return "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", false })
	addr := proxyTo(t, plainEndpoint(addrPort(t, srv.Addr)))

	// Pipelined: a POST with a body, then a GET with hop-by-hop fields; an empty line before
	// each (as clients send after a POST body) is skipped.
	raw := "\r\nPOST http://" + webAuth + "/form?a=1 HTTP/1.1\r\nHost: ignored\r\nContent-Length: 5\r\nProxy-Authorization: x\r\n\r\nhello\r\n" +
		"GET /x HTTP/1.1\r\nHost: " + webAuth + "\r\nConnection: X-Private, close\r\nX-Private: 1\r\nX-Keep: 2\r\nTE: trailers\r\n\r\n"
	res := rawExchange(t, addr, raw, 2, http.MethodGet)
	if !res[1].Close {
		t.Error("Connection: close from the client was not honoured")
	}
	if srv.Requests.Load() != 2 || srv.Conns.Load() != 1 {
		t.Errorf("%d requests on %d upstream connections, want 2 on 1", srv.Requests.Load(), srv.Conns.Load())
	}
	got := srv.Last()
	if !strings.HasPrefix(got, "GET /x "+webAuth+"\n") || strings.Contains(got, "X-Private") || strings.Contains(got, "Te:") ||
		!strings.Contains(got, "X-Keep: 2") || strings.Contains(got, "Connection") {
		t.Errorf("the upstream saw %q", got)
	}
}

func TestLeanFallsBackToNetHTTP(t *testing.T) {
	app := startCountingApp(t, "app", 0)
	addr := proxyTo(t, plainEndpoint(app.addr))

	big := strings.Repeat("x", maxLeanBody+1)
	for name, raw := range map[string]string{
		"chunked body": "POST http://" + webAuth + "/ HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
		"large body":   "POST http://" + webAuth + "/ HTTP/1.1\r\nHost: x\r\nContent-Length: " + itoa(uint16(len(big))) + "\r\n\r\n" + big,
		"expect":       "POST http://" + webAuth + "/ HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\nhello",
		"HTTP/1.0":     "POST http://" + webAuth + "/ HTTP/1.0\r\nContent-Length: 5\r\n\r\nhello",
		"obs-fold":     "POST http://" + webAuth + "/ HTTP/1.1\r\nHost: x\r\nX-A: 1\r\n 2\r\nContent-Length: 5\r\n\r\nhello",
	} {
		// Then a second, lean-able request on the same connection, now served by net/http.
		second := "GET http://" + webAuth + "/ HTTP/1.1\r\nHost: x\r\n\r\n"
		n := 2
		if strings.Contains(name, "1.0") {
			second, n = "", 1
		}
		res := rawExchange(t, addr, raw+second, n, http.MethodPost)
		want := "hello"
		if name == "large body" {
			want = big
		}
		if b := proxytest.Body(res[0]); res[0].StatusCode != 200 || b != want {
			t.Errorf("%s: %d, %d bytes", name, res[0].StatusCode, len(b))
		}
		if n == 2 && res[1].StatusCode != 200 {
			t.Errorf("%s: the next request: %d", name, res[1].StatusCode)
		}
	}
}

func TestLeanStaleConnectionIsRetried(t *testing.T) {
	// The upstream closes every connection after one response, without saying so.
	srv := proxytest.StartScripted(t, func(int64, string) (string, bool) { return "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", true })
	addr := proxyTo(t, plainEndpoint(addrPort(t, srv.Addr)))
	c := proxyClient(t, addr)
	for i := range 5 {
		if res, b := get(t, c, "http://"+webAuth+"/"); res.StatusCode != 200 || b != "ok" {
			t.Fatalf("GET %d on a pool of closed connections: %d %q", i, res.StatusCode, b)
		}
	}
}

func TestLeanUpstreamFailures(t *testing.T) {
	srv := proxytest.StartScripted(t, proxytest.ResponseFailures)
	addr := proxyTo(t, plainEndpoint(addrPort(t, srv.Addr)))
	post := "POST http://" + webAuth + "/ HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n" // not retried
	for i := range 2 {
		if res := rawExchange(t, addr, post, 1, http.MethodPost); res[0].StatusCode != http.StatusBadGateway {
			t.Errorf("bad response %d: %d, want 502", i+1, res[0].StatusCode)
		}
	}
	for i := range 2 { // the head went out: the client connection is cut
		if proxytest.CompleteResponse(proxytest.Dial(t, addr), post) {
			t.Errorf("truncated body %d reached the client as complete", i+1)
		}
	}
	if !proxytest.ChunkedCut(proxytest.Dial(t, addr), post) { // chunk extensions past net/http's budget
		t.Error("a body with too much chunk overhead was relayed whole")
	}
}

func TestLeanDrainClosesIdleConnections(t *testing.T) {
	app := startCountingApp(t, "app", 0)
	r := newFakeResolver()
	r.target(webAuth, plainEndpoint(app.addr))
	_, addr, cancel, served := serve(t, testConfig(), Deps{Resolver: r})
	_, br := send(t, addr, "GET http://"+webAuth+"/ HTTP/1.1\r\nHost: x\r\n\r\n")
	if res, err := http.ReadResponse(br, nil); err != nil || res.StatusCode != 200 {
		t.Fatalf("%v %v", res, err)
	}
	cancel()
	if _, err := br.ReadByte(); err == nil {
		t.Error("an idle keep-alive connection got bytes after the shutdown")
	}
	testutil.Recv(t, served, testutil.StopWithin, "Serve to return")
}

func TestUpgrade(t *testing.T) {
	// An application that switches to an echo protocol on "Upgrade: echo".
	lis := testutil.Listen(t)
	var wg sync.WaitGroup
	proxytest.ServeHTTP(t, lis, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != "echo" {
			http.Error(w, "no upgrade", http.StatusBadRequest)
			return
		}
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		wg.Add(1)
		defer wg.Done()
		_, _ = brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
		_ = brw.Flush()
		echo(conn)
	}))
	t.Cleanup(func() { testutil.Wait(t, testutil.StopWithin, "the upgraded handlers", wg.Wait) })
	addr := proxyTo(t, plainEndpoint(addrPort(t, lis.Addr())))

	c, br := send(t, addr, "GET http://"+webAuth+"/ws HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
	res, err := http.ReadResponse(br, nil)
	if err != nil || res.StatusCode != http.StatusSwitchingProtocols || res.Header.Get("Upgrade") != "echo" {
		t.Fatalf("upgrade: %v %v", res, err)
	}
	_, _ = io.WriteString(c, "ping")
	_ = c.(*net.TCPConn).CloseWrite()
	if b, err := io.ReadAll(br); err != nil || string(b) != "ping" {
		t.Errorf("after the upgrade: %q, %v", b, err)
	}
}

// TestClientLeavesLongPoll: a client that closes its connection while its request waits for
// the upstream's response head (a long poll it gave up on) makes the proxy close the
// upstream connection, as linkerd2-proxy drops the request; the upstream sees its request
// cancelled instead of being held until it answers.
func TestClientLeavesLongPoll(t *testing.T) {
	app := proxytest.StartLongPoll(t)
	addr := proxyTo(t, plainEndpoint(addrPort(t, app.Addr)))
	c, _ := send(t, addr, "GET http://"+webAuth+"/poll HTTP/1.1\r\nHost: "+webAuth+"\r\n\r\n")
	testutil.Recv(t, app.Arrived, 10*time.Second, "the request to reach the application")
	_ = c.Close()
	testutil.Recv(t, app.Cancelled, h1.WatchDelay+10*time.Second, "the application's request to be cancelled")
}
