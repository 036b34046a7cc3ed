package outbound

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/meridian-mesh/meridian/internal/testutil"
	"github.com/meridian-mesh/meridian/proxy/discovery"
	"github.com/meridian-mesh/meridian/proxy/internal/proxytest"
	"github.com/meridian-mesh/meridian/proxy/metrics"
)

// countingApp is an application that counts its requests and answers after delay.
type countingApp struct {
	addr  netip.AddrPort
	n     atomic.Int64
	delay time.Duration
}

func startCountingApp(t testing.TB, name string, delay time.Duration) *countingApp {
	t.Helper()
	a := &countingApp{delay: delay}
	lis := testutil.Listen(t)
	a.addr = addrPort(t, lis.Addr())
	proxytest.ServeHTTP(t, lis, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.n.Add(1)
		if a.delay > 0 { // the application's latency, which the balancer is to notice
			timer := time.NewTimer(a.delay)
			select {
			case <-timer.C:
			case <-r.Context().Done():
				timer.Stop()
			}
		}
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("X-App", name)
		_, _ = w.Write(body)
	}))
	return a
}

func (a *countingApp) endpoint(pod string) discovery.Endpoint {
	e := plainEndpoint(a.addr)
	e.Labels = map[string]string{"service": "web", "namespace": "shop", "pod": pod}
	return e
}

func TestRemovedEndpointGetsNoRequests(t *testing.T) {
	a, b := startCountingApp(t, "a", 0), startCountingApp(t, "b", 0)
	r := newFakeResolver()
	ft := r.target(webAuth, a.endpoint("a"), b.endpoint("b"))
	reg := prometheus.NewRegistry()
	_, addr := startProxy(t, testConfig(), Deps{Resolver: r, Metrics: metrics.New(reg)})
	c := proxyClient(t, addr)

	testutil.Eventually(t, 10*time.Second, "both endpoints to get requests", func() bool {
		get(t, c, "http://"+webAuth+"/")
		return a.n.Load() > 0 && b.n.Load() > 0
	})
	ft.set(a.endpoint("a"))
	streak := 0
	testutil.Eventually(t, 10*time.Second, "the removal to be applied (20 requests in a row to a)", func() bool {
		if res, _ := get(t, c, "http://"+webAuth+"/"); res.Header.Get("X-App") == "a" {
			streak++
		} else {
			streak = 0
		}
		return streak >= 20
	})
	before := b.n.Load()
	for range 100 {
		if res, _ := get(t, c, "http://"+webAuth+"/"); res.StatusCode != 200 || res.Header.Get("X-App") != "a" {
			t.Fatalf("after the removal: %d from %q", res.StatusCode, res.Header.Get("X-App"))
		}
	}
	if n := b.n.Load(); n != before {
		t.Errorf("the removed endpoint got %d more requests", n-before)
	}
	// Its pooled connections are closed.
	testutil.Eventually(t, 10*time.Second, "the removed endpoint's connections to close", func() bool {
		return proxytest.Gathered(t, reg, "tcp_open_connections", map[string]string{"dst_pod": "b"}) == 0
	})
}

func TestSlowEndpointGetsFewerRequests(t *testing.T) {
	fast, slow := startCountingApp(t, "fast", 0), startCountingApp(t, "slow", 50*time.Millisecond)
	addr := proxyTo(t, fast.endpoint("fast"), slow.endpoint("slow"))
	c := proxyClient(t, addr)

	const workers, each = 4, 50
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				res, err := c.Get("http://" + webAuth + "/")
				if err != nil {
					errs <- err
					return
				}
				_, _ = io.Copy(io.Discard, res.Body)
				_ = res.Body.Close()
			}
		}()
	}
	testutil.Wait(t, 60*time.Second, "the requests", wg.Wait)
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// A uniform choice would give each about half; P2C over peak-EWMA gives the slow one a
	// small share. The margin is wide: a third of the fast one's.
	f, s := fast.n.Load(), slow.n.Load()
	if f+s != workers*each || s*3 > f {
		t.Errorf("fast got %d, slow %d of %d requests; want the slow one under a third of the fast one", f, s, workers*each)
	}
}

// zeroRand makes every P2C draw compare the set's first two endpoints, in order: with equal
// costs the first wins, so a test knows which endpoint a fresh target tries first.
type zeroRand struct{}

func (zeroRand) Uint64() uint64 { return 0 }

func TestConnectErrorRetriedOnAnotherEndpoint(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := addrPort(t, lis.Addr())
	_ = lis.Close() // connections to it are refused
	live := startCountingApp(t, "live", 0)
	r := newFakeResolver()
	cfg := testConfig()
	cfg.Balance.Rand = zeroRand{}
	_, addr := startProxy(t, cfg, Deps{Resolver: r})
	c := proxyClient(t, addr)

	for i := range 5 { // fresh targets: the dead endpoint is tried first each time
		auth := fmt.Sprintf("web%d.shop.svc.cluster.local:8080", i)
		r.target(auth, plainEndpoint(dead), live.endpoint("live"))
		res, err := c.Post("http://"+auth+"/", "text/plain", strings.NewReader("payload"))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		_ = res.Body.Close()
		if res.StatusCode != 200 || string(body) != "payload" {
			t.Errorf("%s: %d %q, want the body through to the live endpoint", auth, res.StatusCode, body)
		}
	}

	// TCP (least connections) as well.
	echoAddr := startEcho(t)
	for i := range 5 {
		auth := fmt.Sprintf("db%d.shop.svc.cluster.local:5432", i)
		r.target(auth, plainEndpoint(dead), plainEndpoint(echoAddr))
		if got := connectEcho(t, addr, auth, "tcp"); got != "tcp" {
			t.Errorf("CONNECT %s: %q", auth, got)
		}
	}

	// One endpoint, refusing: nothing to retry on.
	r.target("dead.shop.svc.cluster.local:8080", plainEndpoint(dead))
	if res, _ := get(t, c, "http://dead.shop.svc.cluster.local:8080/"); res.StatusCode != http.StatusBadGateway {
		t.Errorf("the only endpoint refuses: %d, want 502", res.StatusCode)
	}
}

func TestNoRetryAfterTheRequestWasSent(t *testing.T) {
	// The first endpoint reads the request and hangs up without answering.
	lis := testutil.Listen(t)
	var hungUp atomic.Int64
	testutil.ServeConns(t, lis, "the hang-up server", func(c net.Conn) {
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		_, _ = http.ReadRequest(bufio.NewReader(c))
		hungUp.Add(1)
	})
	live := startCountingApp(t, "live", 0)
	r := newFakeResolver()
	r.target(webAuth, plainEndpoint(addrPort(t, lis.Addr())), live.endpoint("live"))
	cfg := testConfig()
	cfg.Balance.Rand = zeroRand{}
	_, addr := startProxy(t, cfg, Deps{Resolver: r})

	res, err := proxyClient(t, addr).Post("http://"+webAuth+"/", "text/plain", strings.NewReader("once"))
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	if res.StatusCode != http.StatusBadGateway || hungUp.Load() != 1 || live.n.Load() != 0 {
		t.Errorf("answered %d; the first endpoint read %d requests, the second %d; want 502, 1, 0",
			res.StatusCode, hungUp.Load(), live.n.Load())
	}
}
