package httpproxy

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/meridian-mesh/meridian/internal/testutil"
)

// miniProxy is the smallest explicit proxy built on Reader: it forwards each request to its
// target (one upstream connection per request) and tunnels CONNECT. It shows the API in use
// against real clients; the outbound listener adds balancing, TLS and metrics.
func miniProxy(t *testing.T) string {
	t.Helper()
	lis := testutil.Listen(t)
	testutil.ServeConns(t, lis, "the mini proxy", serveProxyConn)
	return lis.Addr().String()
}

func serveProxyConn(c net.Conn) {
	defer c.Close()
	r := NewReader(c, Options{})
	for {
		req, err := r.Next()
		var perr *Error
		if errors.As(err, &perr) {
			_ = perr.WriteResponse(c)
		}
		if err != nil {
			return
		}
		up, err := net.DialTimeout("tcp", req.Target.String(), 5*time.Second)
		if err != nil {
			_, _ = io.WriteString(c, "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
			return
		}
		if req.Form == AuthorityForm {
			_, _ = io.WriteString(c, ConnectEstablished)
			_, _ = up.Write(r.Buffered())
			done := make(chan struct{})
			go func() { _, _ = io.Copy(c, up); close(done) }()
			_, _ = io.Copy(up, c)
			_ = up.(*net.TCPConn).CloseWrite()
			<-done
			_ = up.Close()
			return
		}
		err = req.HTTP.Write(up)
		if err == nil {
			var resp *http.Response
			if resp, err = http.ReadResponse(bufio.NewReader(up), req.HTTP); err == nil {
				err = resp.Write(c)
				_ = resp.Body.Close()
			}
		}
		_ = up.Close()
		if err != nil {
			return
		}
	}
}

func TestLoopbackHTTPClientThroughProxy(t *testing.T) {
	type seen struct{ uri, host, proxyConn string }
	got := make(chan seen, 4)
	backend := testutil.Listen(t)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- seen{r.RequestURI, r.Host, r.Header.Get("Proxy-Connection")}
		_, _ = io.WriteString(w, "hello from "+r.URL.Path)
	})}
	served := make(chan struct{})
	go func() { defer close(served); _ = srv.Serve(backend) }()
	t.Cleanup(func() { _ = srv.Close(); <-served })

	proxyURL, _ := url.Parse("http://" + miniProxy(t))
	tr := &http.Transport{Proxy: http.ProxyURL(proxyURL)}
	t.Cleanup(tr.CloseIdleConnections)
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	for _, path := range []string{"/one?x=1", "/two"} { // two requests on one proxy connection
		resp, err := client.Get("http://" + backend.Addr().String() + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != 200 || !strings.HasPrefix(string(body), "hello from /") {
			t.Fatalf("%s: %d %q", path, resp.StatusCode, body)
		}
		s := testutil.Recv(t, got, 5*time.Second, "request at the backend")
		if s.uri != path || s.host != backend.Addr().String() || s.proxyConn != "" {
			t.Fatalf("backend saw %+v; want origin-form %q, Host %q", s, path, backend.Addr())
		}
	}
}

func TestLoopbackConnectTunnel(t *testing.T) {
	echo := testutil.Listen(t)
	testutil.ServeConns(t, echo, "the echo server", func(c net.Conn) { _, _ = io.Copy(c, c) })

	c, err := net.Dial("tcp", miniProxy(t))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	// The first tunnel bytes follow the head at once, as eager clients send them.
	_, err = io.WriteString(c, "CONNECT "+echo.Addr().String()+" HTTP/1.1\r\nHost: "+echo.Addr().String()+"\r\n\r\nping")
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	want := ConnectEstablished + "ping"
	buf := make([]byte, len(want))
	if _, err := io.ReadFull(br, buf); err != nil || string(buf) != want {
		t.Fatalf("read %q, %v; want %q", buf, err, want)
	}
	_, _ = io.WriteString(c, "pong")
	if _, err := io.ReadFull(br, buf[:4]); err != nil || string(buf[:4]) != "pong" {
		t.Fatalf("echo %q, %v", buf[:4], err)
	}
}

func TestLoopbackRefusal(t *testing.T) {
	c, err := net.Dial("tcp", miniProxy(t))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	_, _ = io.WriteString(c, "GET / HTTP/1.1\r\nUser-Agent: x\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "without Host") {
		t.Fatalf("%d %q", resp.StatusCode, body)
	}
}
