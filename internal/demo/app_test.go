package demo

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"

	tu "github.com/meridian-mesh/meridian/internal/testutil"
)

// startApp runs an App on loopback ports and returns the addresses it serves.
func startApp(t *testing.T, reg prometheus.Registerer) (app *App, httpAddr, grpcAddr, tcpAddr string) {
	t.Helper()
	var err error
	app, err = NewApp(AppConfig{Pod: "shop/web-1", HTTP: []string{"127.0.0.1:0"}, GRPC: []string{"127.0.0.1:0"}, TCP: []string{"127.0.0.1:0"}}, reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	tu.Go(t, "the app", app.Run)
	tu.Eventually(t, 10*time.Second, "the app to be ready", func() bool { return app.Ready() == nil })
	return app, app.lis[0].Addr().String(), app.lis[1].Addr().String(), app.lis[2].Addr().String()
}

func TestAppServesEveryProtocol(t *testing.T) {
	app, h, g, c := startApp(t, prometheus.NewRegistry())

	req, _ := http.NewRequest(http.MethodGet, "http://"+h+"/x", nil)
	req.Header.Set(ClientIDHeader, lgID)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var e Echo
	if err := json.NewDecoder(resp.Body).Decode(&e); err != nil || e.Pod != "shop/web-1" || e.ClientID != lgID || e.Path != "/x" {
		t.Errorf("echo %+v, %v", e, err)
	}
	resp.Body.Close()

	conn := tu.DialGRPC(t, g)
	var hdr metadata.MD
	ctx := metadata.AppendToOutgoingContext(context.Background(), ClientIDHeader, lgID)
	r, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Header(&hdr))
	if err != nil || r.GetStatus() != healthpb.HealthCheckResponse_SERVING || hdr.Get(grpcClientIDKey)[0] != lgID || hdr.Get(grpcPodKey)[0] != "shop/web-1" {
		t.Errorf("gRPC: %v %v %v", r, err, hdr)
	}

	tc, err := net.Dial("tcp", c)
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	fmt.Fprintf(tc, "SELECT 1\n")
	line, err := bufio.NewReader(tc).ReadString('\n')
	if err != nil || line != "shop/web-1: SELECT 1\n" {
		t.Errorf("line echo %q, %v", line, err)
	}
	for _, want := range []struct {
		proto, id string
	}{{"http", lgID}, {"grpc", lgID}, {"tcp", ""}} {
		tu.Eventually(t, 5*time.Second, "the "+want.proto+" count", func() bool {
			return testutil.ToFloat64(app.requests.WithLabelValues(want.proto, want.id)) == 1
		})
	}
}

// fakeProxy plays an outbound proxy for the generator: absolute-form HTTP and HTTP/2
// requests go to routes[authority] with l5d-client-id set to id (403, or gRPC's
// PERMISSION_DENIED, for a denied authority); CONNECT tunnels to routes[authority].
type fakeProxy struct {
	mu     sync.Mutex
	id     string
	routes map[string]string
	denied map[string]bool
}

func (p *fakeProxy) set(f func()) { p.mu.Lock(); defer p.mu.Unlock(); f() }

func (p *fakeProxy) backend(auth string) (string, string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.routes[auth], p.id, p.denied[auth]
}

func startFakeProxy(t *testing.T, p *fakeProxy) string {
	l := tu.Listen(t)
	h2 := &http.Transport{Protocols: new(http.Protocols)}
	h2.Protocols.SetUnencryptedHTTP2(true)
	var protos http.Protocols
	protos.SetHTTP1(true)
	protos.SetUnencryptedHTTP2(true)
	srv := &http.Server{Protocols: &protos, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		addr, id, denied := p.backend(r.Host)
		switch {
		case r.Method == http.MethodConnect:
			up, err := net.Dial("tcp", addr)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadGateway)
				return
			}
			c, _, _ := http.NewResponseController(w).Hijack()
			io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n")
			go func() { io.Copy(up, c); up.Close() }()
			io.Copy(c, up)
			c.Close()
		case denied && r.ProtoMajor == 2:
			w.Header().Set("Content-Type", "application/grpc")
			w.Header().Set("Grpc-Status", "7")
			w.WriteHeader(http.StatusOK)
		case denied:
			http.Error(w, "unauthorized", http.StatusForbidden)
		default:
			rp := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
				pr.Out.URL.Scheme, pr.Out.URL.Host = "http", addr
				pr.Out.Header.Set(ClientIDHeader, id)
			}}
			if r.ProtoMajor == 2 {
				rp.Transport = h2
			}
			rp.ServeHTTP(w, r)
		}
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close(); h2.CloseIdleConnections() })
	return l.Addr().String()
}

func TestTrafficCountsWhatItGets(t *testing.T) {
	_, h, g, c := startApp(t, nil)
	p := &fakeProxy{id: lgID, routes: map[string]string{"web:80": h, "cart:9090": g, "pg:5432": c}, denied: map[string]bool{}}
	proxyAddr := startFakeProxy(t, p)
	var targets []Target
	for _, s := range []string{"http://web", "grpc://cart:9090", "tcp://pg:5432"} {
		tg, err := ParseTarget(s)
		if err != nil {
			t.Fatal(err)
		}
		targets = append(targets, tg)
	}
	reg := prometheus.NewRegistry()
	tr, err := NewTraffic(TrafficConfig{Targets: targets, Proxy: proxyAddr, Rate: 50, ClientID: lgID}, reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	tu.Go(t, "the traffic", tr.Run)
	count := func(target, result string) float64 {
		return testutil.ToFloat64(tr.requests.WithLabelValues(target, string(mustTarget(t, target).Protocol), result))
	}
	for _, tg := range targets {
		tu.Eventually(t, 10*time.Second, tg.URL+" to answer", func() bool { return count(tg.URL, ResultOK) >= 3 })
	}
	if got := testutil.ToFloat64(tr.seen.WithLabelValues("http://web", "shop/web-1", lgID)); got < 3 {
		t.Errorf("identity seen by web: %v", got)
	}
	// Denied: 403 and PERMISSION_DENIED.
	p.set(func() { p.denied["web:80"], p.denied["cart:9090"] = true, true })
	for _, u := range []string{"http://web", "grpc://cart:9090"} {
		tu.Eventually(t, 10*time.Second, u+" to be denied", func() bool { return count(u, ResultDenied) >= 2 })
	}
	// A server that saw another identity, and a target that cannot be reached, fail.
	p.set(func() { p.denied = map[string]bool{}; p.id = webID; p.routes["pg:5432"] = "127.0.0.1:1" })
	for _, u := range []string{"http://web", "grpc://cart:9090", "tcp://pg:5432"} {
		tu.Eventually(t, 10*time.Second, u+" to fail", func() bool { return count(u, ResultFailed) >= 2 })
	}
}

func mustTarget(t *testing.T, s string) Target {
	tg, err := ParseTarget(s)
	if err != nil {
		t.Fatal(err)
	}
	return tg
}

func TestTrafficRefusesBadConfig(t *testing.T) {
	tg := mustTarget(t, "http://web")
	for _, c := range []struct {
		cfg  TrafficConfig
		want string
	}{
		{TrafficConfig{Proxy: "x:1", Rate: 1}, "no --target"},
		{TrafficConfig{Targets: []Target{tg}, Rate: 1}, "no --proxy"},
		{TrafficConfig{Targets: []Target{tg}, Proxy: "x:1", Rate: 0}, "--rate"},
	} {
		if _, err := NewTraffic(c.cfg, nil, nil); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("NewTraffic(%+v) = %v, want %q", c.cfg, err, c.want)
		}
	}
	if _, err := NewApp(AppConfig{}, nil, nil); err == nil {
		t.Error("an app with nothing to serve started")
	}
	if _, err := NewApp(AppConfig{HTTP: []string{"256.0.0.1:1"}}, nil, nil); err == nil {
		t.Error("an app on a bad address started")
	}
}
