package demo

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Target is one service the traffic generator calls: http://host[:port][/path] (through the
// proxy as an HTTP proxy), grpc://host:port (HTTP/2 to the proxy, routed by :authority) or
// tcp://host:port (CONNECT through the proxy, then a line echoed back).
type Target struct {
	URL       string // as given; the metrics' target label
	Protocol  AppKind
	Authority string // host:port
	Path      string // HTTP only
}

// ParseTarget parses a --target.
func ParseTarget(s string) (Target, error) {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		return Target{}, fmt.Errorf("target %q: want http://host[:port][/path], grpc://host:port or tcp://host:port", s)
	}
	t := Target{URL: s, Protocol: AppKind(u.Scheme), Path: u.Path}
	port := u.Port()
	switch t.Protocol {
	case AppHTTP:
		if port == "" {
			port = "80"
		}
		if t.Path == "" {
			t.Path = "/"
		}
	case AppGRPC, AppTCP:
		if port == "" {
			return Target{}, fmt.Errorf("target %q: a %s target needs a port", s, u.Scheme)
		}
	default:
		return Target{}, fmt.Errorf("target %q: scheme %q: want http, grpc or tcp", s, u.Scheme)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return Target{}, fmt.Errorf("target %q: bad port %q", s, port)
	}
	t.Authority = net.JoinHostPort(u.Hostname(), port)
	if _, _, err := net.SplitHostPort(t.Authority); err != nil { // url.Parse lets "]" through as a host
		return Target{}, fmt.Errorf("target %q: bad host %q", s, u.Hostname())
	}
	return t, nil
}

// TrafficConfig configures the generator: `meridian demo traffic`.
type TrafficConfig struct {
	Targets []Target
	Proxy   string  // the outbound listener of the generator's pod's proxy (host:port)
	Rate    float64 // requests (TCP: connections) per second per target
	// ClientID is the identity of the generator's pod: a server that reports another client
	// identity than this one (or none, from a meshed server) counts as a failure.
	ClientID string
	Timeout  time.Duration // per request; 5 s
}

// Results of a request, the values of demo_traffic_requests_total's result label.
const (
	ResultOK     = "ok"
	ResultDenied = "denied" // 403, or gRPC PERMISSION_DENIED: the server's policy said no
	ResultFailed = "failed"
)

// Traffic is the generator: one loop per target, each sending at most Rate requests per
// second one after the other (a slow answer delays the next; nothing piles up). It counts
// demo_traffic_requests_total{target,protocol,result}, demo_traffic_latency_ms{target} and
// demo_traffic_server_identity_total{target,pod,client_id} (who answered, and the client
// identity the server said it saw), and logs every failure at warn (at most one a second per
// target, with a count of those not logged).
type Traffic struct {
	cfg      TrafficConfig
	log      *zap.Logger
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	seen     *prometheus.CounterVec
	httpc    *http.Client
	started  atomic.Bool
}

// NewTraffic builds the generator; its metrics go to reg.
func NewTraffic(cfg TrafficConfig, reg prometheus.Registerer, log *zap.Logger) (*Traffic, error) {
	if len(cfg.Targets) == 0 {
		return nil, errors.New("no --target")
	}
	if cfg.Proxy == "" {
		return nil, errors.New("no --proxy: the generator calls through its pod's proxy")
	}
	if cfg.Rate <= 0 || cfg.Rate > 1000 {
		return nil, fmt.Errorf("--rate %v: want a rate in (0, 1000] requests per second", cfg.Rate)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 5 * time.Second
	}
	if log == nil {
		log = zap.NewNop()
	}
	proxyURL := &url.URL{Scheme: "http", Host: cfg.Proxy}
	t := &Traffic{cfg: cfg, log: log,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "demo_traffic_requests_total", Help: "Requests the generator sent, by target and result (ok, denied, failed)."}, []string{"target", "protocol", "result"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "demo_traffic_latency_ms", Help: "Latency of the generator's requests as it sees them, in milliseconds.",
			Buckets: []float64{0.5, 1, 2, 3, 4, 5, 7.5, 10, 15, 20, 30, 50, 75, 100, 200, 500, 1000, 2000, 5000}}, []string{"target"}),
		seen: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "demo_traffic_server_identity_total", Help: "Answers by the pod that answered and the client identity it said it saw."}, []string{"target", "pod", "client_id"}),
		httpc: &http.Client{Timeout: cfg.Timeout, Transport: &http.Transport{Proxy: http.ProxyURL(proxyURL), MaxIdleConnsPerHost: 4,
			IdleConnTimeout: 30 * time.Second}},
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{t.requests, t.latency, t.seen} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	for _, tg := range cfg.Targets { // every series exists from the start
		for _, r := range []string{ResultOK, ResultDenied, ResultFailed} {
			t.requests.WithLabelValues(tg.URL, string(tg.Protocol), r)
		}
	}
	return t, nil
}

// Ready is nil once the loops run.
func (t *Traffic) Ready() error {
	if !t.started.Load() {
		return errors.New("starting")
	}
	return nil
}

// Run sends traffic until ctx ends.
func (t *Traffic) Run(ctx context.Context) error {
	defer t.httpc.CloseIdleConnections()
	var wg sync.WaitGroup
	errs := make(chan error, len(t.cfg.Targets))
	for _, tg := range t.cfg.Targets {
		call := t.callHTTP
		switch tg.Protocol {
		case AppGRPC:
			conn, err := grpc.NewClient("passthrough:///"+t.cfg.Proxy, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithAuthority(tg.Authority))
			if err != nil {
				errs <- err
				continue
			}
			defer conn.Close()
			client := healthpb.NewHealthClient(conn)
			call = func(ctx context.Context, tg Target) (Echo, error) { return t.callGRPC(ctx, client) }
		case AppTCP:
			call = t.callTCP
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			t.loop(ctx, tg, call)
		}()
	}
	t.started.Store(true)
	t.log.Info("sending", zap.String("proxy", t.cfg.Proxy), zap.Float64("rate", t.cfg.Rate), zap.Int("targets", len(t.cfg.Targets)))
	wg.Wait()
	close(errs)
	return errors.Join(drain(errs)...)
}

// errDenied marks an answer the server's policy refused.
var errDenied = errors.New("denied by policy")

func (t *Traffic) loop(ctx context.Context, tg Target, call func(context.Context, Target) (Echo, error)) {
	tick := time.NewTicker(time.Duration(float64(time.Second) / t.cfg.Rate))
	defer tick.Stop()
	var lastLog time.Time
	var unlogged int
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		rctx, cancel := context.WithTimeout(ctx, t.cfg.Timeout)
		start := time.Now()
		echo, err := call(rctx, tg)
		cancel()
		if ctx.Err() != nil {
			return // stopping: what was cut short is not a failure
		}
		t.latency.WithLabelValues(tg.URL).Observe(float64(time.Since(start)) / float64(time.Millisecond))
		if err == nil && echo.ClientID != "" && echo.ClientID != t.cfg.ClientID {
			// An unmeshed server sees no identity; a meshed one must see ours.
			err = fmt.Errorf("%s saw client identity %q, want %q", echo.Pod, echo.ClientID, t.cfg.ClientID)
		}
		result := ResultOK
		switch {
		case errors.Is(err, errDenied):
			result = ResultDenied
		case err != nil:
			result = ResultFailed
			if time.Since(lastLog) >= time.Second {
				t.log.Warn("request failed", zap.String("target", tg.URL), zap.Error(err), zap.Int("notLogged", unlogged))
				lastLog, unlogged = time.Now(), 0
			} else {
				unlogged++
			}
		default:
			t.seen.WithLabelValues(tg.URL, echo.Pod, echo.ClientID).Inc()
		}
		t.requests.WithLabelValues(tg.URL, string(tg.Protocol), result).Inc()
	}
}

func (t *Traffic) callHTTP(ctx context.Context, tg Target) (Echo, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+tg.Authority+tg.Path, nil)
	if err != nil {
		return Echo{}, err
	}
	resp, err := t.httpc.Do(req)
	if err != nil {
		return Echo{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return Echo{}, err
	}
	switch {
	case resp.StatusCode == http.StatusForbidden:
		return Echo{}, errDenied
	case resp.StatusCode != http.StatusOK:
		return Echo{}, fmt.Errorf("%s (%s)", resp.Status, firstLine(resp.Header.Get("L5d-Proxy-Error"), string(body)))
	}
	var e Echo
	if err := json.Unmarshal(body, &e); err != nil {
		return Echo{}, fmt.Errorf("answer is not the echo: %w", err)
	}
	return e, nil
}

func firstLine(ss ...string) string {
	for _, s := range ss {
		if s = strings.TrimSpace(s); s != "" {
			s, _, _ = strings.Cut(s, "\n")
			if len(s) > 200 {
				s = s[:200] + "..."
			}
			return s
		}
	}
	return ""
}

func (t *Traffic) callGRPC(ctx context.Context, client healthpb.HealthClient) (Echo, error) {
	var hdr metadata.MD
	resp, err := client.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Header(&hdr))
	if status.Code(err) == codes.PermissionDenied {
		return Echo{}, errDenied
	}
	if err != nil {
		return Echo{}, err
	}
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		return Echo{}, fmt.Errorf("status %s", resp.GetStatus())
	}
	e := Echo{}
	if v := hdr.Get(grpcPodKey); len(v) > 0 {
		e.Pod = v[0]
	}
	if v := hdr.Get(grpcClientIDKey); len(v) > 0 {
		e.ClientID = v[0]
	}
	return e, nil
}

// callTCP opens a tunnel to the target with CONNECT, sends one line and checks its echo.
func (t *Traffic) callTCP(ctx context.Context, tg Target) (Echo, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", t.cfg.Proxy)
	if err != nil {
		return Echo{}, err
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Now()) })
	defer stop()
	if _, err := fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", tg.Authority, tg.Authority); err != nil {
		return Echo{}, err
	}
	r := bufio.NewReader(c)
	resp, err := http.ReadResponse(r, &http.Request{Method: http.MethodConnect})
	if err != nil {
		return Echo{}, fmt.Errorf("CONNECT: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return Echo{}, fmt.Errorf("CONNECT: %s (%s)", resp.Status, resp.Header.Get("L5d-Proxy-Error"))
	}
	line := "SELECT " + strconv.FormatInt(time.Now().UnixNano(), 10)
	if _, err := io.WriteString(c, line+"\n"); err != nil {
		return Echo{}, err
	}
	got, err := r.ReadString('\n')
	if err != nil {
		return Echo{}, fmt.Errorf("no echo: %w", err)
	}
	pod, echoed, ok := strings.Cut(strings.TrimRight(got, "\r\n"), ": ")
	if !ok || echoed != line {
		return Echo{}, fmt.Errorf("echo %q, want %q", firstLine(got), line)
	}
	return Echo{Pod: pod}, nil
}
