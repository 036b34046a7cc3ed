package inbound

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/meridian-mesh/meridian/internal/testutil"
	"github.com/meridian-mesh/meridian/proxy/h1"
	"github.com/meridian-mesh/meridian/proxy/internal/proxytest"
	"github.com/meridian-mesh/meridian/proxy/transportheader"
)

// startScriptedApp runs a scripted application (proxytest.Scripted) until t ends.
func startScriptedApp(t *testing.T, respond func(n int64) (resp string, closeAfter bool)) *proxytest.Scripted {
	t.Helper()
	return proxytest.StartScripted(t, func(n int64, _ string) (string, bool) { return respond(n) })
}

const okResponse = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"

// TestLeanRequestForwarding: pipelined requests go to the application on one pooled
// connection with their bodies; hop-by-hop fields (and those Connection names) are dropped;
// a client's l5d-client-id is stripped and, over mTLS with the transport header, the
// client's identity set instead; Connection: close from the client is honoured; an empty
// line before a request (as clients send after a POST body) is skipped.
func TestLeanRequestForwarding(t *testing.T) {
	app := startScriptedApp(t, func(int64) (string, bool) { return okResponse, false })
	pki := testutil.NewPKI(t)
	p := startProxy(t, Config{DefaultPort: app.Port(), Identity: serverID}, Deps{TLS: proxytest.TLS(t, pki, serverID)})
	raw := "\r\nPOST /form?a=1 HTTP/1.1\r\nHost: web:8080\r\nContent-Length: 5\r\nL5d-Client-Id: spoofed\r\n\r\nhello\r\n" +
		"GET /x HTTP/1.1\r\nHost: web:8080\r\nConnection: X-Private, close\r\nX-Private: 1\r\nX-Keep: 2\r\nTE: trailers\r\n\r\n"
	res := proxytest.Exchange(t, proxytest.Dial(t, p.addr), raw, 2, http.MethodGet)
	if !res[1].Close || proxytest.Body(res[0]) != "ok" {
		t.Errorf("responses: close %v, body %q", res[1].Close, proxytest.Body(res[0]))
	}
	if app.Requests.Load() != 2 || app.Conns.Load() != 1 {
		t.Errorf("%d requests on %d application connections, want 2 on 1", app.Requests.Load(), app.Conns.Load())
	}
	got := app.Last()
	if !strings.HasPrefix(got, "GET /x web:8080\n") || strings.Contains(got, "X-Private") || strings.Contains(got, "Te:") ||
		!strings.Contains(got, "X-Keep: 2") || strings.Contains(got, "Connection") || strings.Contains(got, "L5d-Client-Id") {
		t.Errorf("the application saw %q", got)
	}

	c, err := client{proxy: p.addr, tls: proxytest.TLS(t, pki, gatewayID)}.dial(context.Background(), "",
		&transportheader.Header{Port: app.Port(), Protocol: transportheader.HTTP1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	proxytest.Exchange(t, c, "POST /form HTTP/1.1\r\nHost: web:8080\r\nL5d-Client-Id: spoofed\r\nContent-Length: 3\r\n\r\nabc", 1, http.MethodPost)
	if got := app.Last(); !strings.Contains(got, "L5d-Client-Id: "+gatewayID+"\r\n") || strings.Contains(got, "spoofed") || !strings.HasSuffix(got, "abc") {
		t.Errorf("over mTLS the application saw %q", got)
	}
}

// TestLeanResponseFramings: chunked bodies with extensions and trailers, interim responses,
// 204, HEAD, hop-by-hop fields and a body delimited by the connection's close all reach
// the client as the application sent them.
func TestLeanResponseFramings(t *testing.T) {
	app := proxytest.StartScripted(t, proxytest.ResponseFramings)
	p := startProxy(t, Config{DefaultPort: app.Port()}, Deps{})
	proxytest.CheckResponseFramings(t, func() net.Conn { return proxytest.Dial(t, p.addr) },
		"GET / HTTP/1.1\r\nHost: web\r\n\r\n", "HEAD / HTTP/1.1\r\nHost: web\r\n\r\n")
}

// TestLeanFallsBackToNetHTTP: a request the lean path does not take goes to net/http with
// every byte read, and so does the rest of its connection.
func TestLeanFallsBackToNetHTTP(t *testing.T) {
	port := httpApp(t)
	p := startProxy(t, Config{DefaultPort: port}, Deps{})
	big := strings.Repeat("x", maxLeanBody+1)
	for name, raw := range map[string]string{
		"chunked body":  "POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
		"large body":    "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: " + strconv.Itoa(len(big)) + "\r\n\r\n" + big,
		"expect":        "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\nhello",
		"HTTP/1.0":      "POST /a HTTP/1.0\r\nContent-Length: 5\r\n\r\nhello",
		"obs-fold":      "POST /a HTTP/1.1\r\nHost: x\r\nX-A: 1\r\n 2\r\nContent-Length: 5\r\n\r\nhello",
		"escaped path":  "POST /%61 HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello",
		"absolute-form": "POST http://x/a HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello",
	} {
		second, n := "GET /b HTTP/1.1\r\nHost: x\r\n\r\n", 2
		if strings.Contains(name, "1.0") {
			second, n = "", 1
		}
		res := proxytest.Exchange(t, proxytest.Dial(t, p.addr), raw+second, n, http.MethodPost)
		want := strconv.Itoa(len("hello"))
		if name == "large body" {
			want = strconv.Itoa(len(big))
		}
		if res[0].StatusCode != 200 || res[0].Header.Get("X-Seen-Body-Len") != want || proxytest.Body(res[0]) != "path=/a" {
			t.Errorf("%s: %d, body length %s, %q", name, res[0].StatusCode, res[0].Header.Get("X-Seen-Body-Len"), proxytest.Body(res[0]))
		}
		if n == 2 && (res[1].StatusCode != 200 || proxytest.Body(res[1]) != "path=/b") {
			t.Errorf("%s: the next request: %d", name, res[1].StatusCode)
		}
	}
}

// TestLeanStaleConnectionIsRetried: an application that closes every connection after one
// response, without saying so, still answers every GET.
func TestLeanStaleConnectionIsRetried(t *testing.T) {
	app := startScriptedApp(t, func(int64) (string, bool) { return okResponse, true })
	p := startProxy(t, Config{DefaultPort: app.Port()}, Deps{})
	hc := client{proxy: p.addr}.httpClient(t, 0)
	for i := range 5 {
		if res, b := get(t, hc, "/", nil); res.StatusCode != 200 || b != "ok" {
			t.Fatalf("GET %d on a pool of closed connections: %d %q", i, res.StatusCode, b)
		}
	}
}

// TestLeanAppFailures: a response the proxy cannot relay exactly is a 502 (counted as a
// failure); one cut short after its head cuts the client's connection.
func TestLeanAppFailures(t *testing.T) {
	app := proxytest.StartScripted(t, proxytest.ResponseFailures)
	p := startProxy(t, Config{DefaultPort: app.Port()}, Deps{})
	post := "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n" // not retried
	for i := range 2 {
		if res := proxytest.Exchange(t, proxytest.Dial(t, p.addr), post, 1, http.MethodPost); res[0].StatusCode != http.StatusBadGateway ||
			res[0].Header.Get("L5d-Proxy-Error") == "" {
			t.Errorf("bad response %d: %d %v, want 502 with l5d-proxy-error", i+1, res[0].StatusCode, res[0].Header)
		}
	}
	if got := p.counter(t, "response_total", map[string]string{"status_code": "502", "classification": "failure"}); got != 2 {
		t.Errorf("502s counted %v times, want 2 (counted before the answer leaves)", got)
	}
	for i := range 2 {
		if proxytest.CompleteResponse(proxytest.Dial(t, p.addr), post) {
			t.Errorf("truncated body %d reached the client as complete", i+1)
		}
	}
	if !proxytest.ChunkedCut(proxytest.Dial(t, p.addr), post) { // chunk extensions past net/http's budget
		t.Error("a body with too much chunk overhead was relayed whole")
	}
}

// TestLeanDrainClosesIdleConnections: when Run's context ends, a keep-alive connection
// between requests is closed at once and Run returns.
func TestLeanDrainClosesIdleConnections(t *testing.T) {
	port := httpApp(t)
	in, cancel, r := runUntil(t, Config{DefaultPort: port}, Deps{})
	c := proxytest.Dial(t, in.Addr().String())
	res := proxytest.Exchange(t, c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n", 1, http.MethodGet)
	if res[0].StatusCode != 200 {
		t.Fatalf("status %d", res[0].StatusCode)
	}
	cancel()
	_ = c.SetDeadline(time.Now().Add(wait))
	if n, err := c.Read(make([]byte, 1)); err == nil {
		t.Errorf("an idle keep-alive connection got %d bytes after the shutdown", n)
	}
	r.wait(t, "Run to return")
}

// TestLeanHeaderValues: route matching reads a lean request's fields by canonical name,
// case-insensitively, every value in order.
func TestLeanHeaderValues(t *testing.T) {
	var h h1.Head
	raw := "GET / HTTP/1.1\r\nHost: a\r\nx-env: canary\r\nX-Other: 1\r\nX-ENV: blue\r\n\r\n"
	if err := h1.ReadHead(bufio.NewReader(strings.NewReader(raw)), &h, 1<<10); err != nil {
		t.Fatal(err)
	}
	if err := h.ParseRequest(); err != nil {
		t.Fatal(err)
	}
	if got := (leanHeader{&h}).Values("X-Env"); strings.Join(got, ",") != "canary,blue" {
		t.Errorf("X-Env: %q", got)
	}
	if got := (leanHeader{&h}).Values("X-Missing"); got != nil {
		t.Errorf("X-Missing: %q", got)
	}
}

// TestForgedClientIDPastDetection: a plaintext client cannot get an l5d-client-id of its
// own to the application by making its request look opaque to protocol detection, with a
// request line longer than detection reads or with empty lines before it. The request is
// handled as HTTP (its header stripped), or refused, never relayed as opaque bytes. The
// application echoes every line it receives, so the client sees what reached it.
func TestForgedClientIDPastDetection(t *testing.T) {
	const forged = "admin.ns.serviceaccount.identity.linkerd.cluster.local"
	for name, tc := range map[string]struct {
		first, prefix string // first is sent, then the detection timeout passes
	}{
		"a request line over the detection bound": {"", "GET /" + strings.Repeat("a", 9000) + " HTTP/1.1\r\n"},
		"an empty line first":                     {"", "\r\nGET / HTTP/1.1\r\n"},
		"a bare LF first":                         {"", "\nGET / HTTP/1.1\r\n"},
		"empty lines over the detection bound":    {"", strings.Repeat("\r\n", 4097) + "GET / HTTP/1.1\r\n"},
		"an empty line, then a wait":              {"\r\n", "GET / HTTP/1.1\r\n"},
	} {
		t.Run(name, func(t *testing.T) {
			p := startProxy(t, Config{DefaultPort: echoApp(t), DetectTimeout: 300 * time.Millisecond}, Deps{})
			c := proxytest.Dial(t, p.addr)
			if tc.first != "" {
				if _, err := io.WriteString(c, tc.first); err != nil {
					t.Fatal(err)
				}
				time.Sleep(500 * time.Millisecond) // past detection's timeout
			}
			if _, err := io.WriteString(c, tc.prefix+"Host: web\r\nL5d-Client-Id: "+forged+"\r\n\r\n"); err != nil {
				t.Fatal(err)
			}
			_ = c.(*net.TCPConn).CloseWrite()
			if err := c.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(c) // to the end of stream, or the deadline
			if bytes.Contains(got, []byte(forged)) {
				t.Errorf("the application saw the client's own l5d-client-id: %q", got[max(0, len(got)-300):])
			}
		})
	}
}

// TestClientLeavesLongPoll: a client that closes its connection while its request waits for
// the application's response head makes the proxy close its connection to the application,
// which sees the request cancelled.
func TestClientLeavesLongPoll(t *testing.T) {
	app := proxytest.StartLongPoll(t)
	p := startProxy(t, Config{DefaultPort: app.Port()}, Deps{})
	c := proxytest.Dial(t, p.addr)
	if _, err := io.WriteString(c, "GET /poll HTTP/1.1\r\nHost: web\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	testutil.Recv(t, app.Arrived, 10*time.Second, "the request to reach the application")
	_ = c.Close()
	testutil.Recv(t, app.Cancelled, h1.WatchDelay+10*time.Second, "the application's request to be cancelled")
}
