package outbound

import (
	"net/http"
	"testing"
	"time"

	"github.com/meridian-mesh/meridian/internal/testutil"
	"github.com/meridian-mesh/meridian/proxy/internal/proxytest"
)

// startStreamApp is an app whose /stream answers its head at once, then sends its body 1.5 s
// later; other paths are counted and answered at once.
func startStreamApp(t *testing.T, name string) *countingApp {
	a := &countingApp{}
	lis := testutil.Listen(t)
	a.addr = addrPort(t, lis.Addr())
	proxytest.ServeHTTP(t, lis, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-App", name)
		if r.URL.Path == "/stream" {
			w.WriteHeader(200)
			w.(http.Flusher).Flush()
			time.Sleep(1500 * time.Millisecond)
			_, _ = w.Write([]byte("end"))
			return
		}
		a.n.Add(1)
		_, _ = w.Write([]byte("ok"))
	}))
	return a
}

// TestRTTIsTimeToResponseHead: the balancer's round-trip sample is the time to the response
// head on every path, as linkerd measures it. The HTTP/2 relay took the whole exchange: one
// 1.5 s streamed response made P2C avoid a 1 ms endpoint (0 of the next 40 requests).
func TestRTTIsTimeToResponseHead(t *testing.T) {
	for _, tc := range []struct {
		name   string
		client func(*testing.T, string) *http.Client
	}{{"http1-lean", func(t *testing.T, a string) *http.Client { return proxyClient(t, a) }},
		{"http2-lean", func(t *testing.T, a string) *http.Client { return h2Client(t, a) }}} {
		a, b := startStreamApp(t, "a"), startStreamApp(t, "b")
		addr := proxyTo(t, a.endpoint("a"), b.endpoint("b"))
		c := tc.client(t, addr)
		res, _ := get(t, c, "http://"+webAuth+"/stream") // head at once (TTFB ~1 ms), body 1.5 s
		streamed := res.Header.Get("X-App")
		for range 40 {
			get(t, c, "http://"+webAuth+"/")
		}
		n := a.n.Load()
		if streamed == "b" {
			n = b.n.Load()
		}
		if n == 0 {
			t.Errorf("%s: after one streamed response from %s, it got none of the next 40 quick requests: the 1.5 s body was taken for its round-trip time", tc.name, streamed)
		}
	}
}
