package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/meridian-mesh/meridian/internal/run"
	"github.com/meridian-mesh/meridian/internal/testutil"
	"github.com/meridian-mesh/meridian/proxy"
	"github.com/meridian-mesh/meridian/proxy/config"
	"github.com/meridian-mesh/meridian/proxy/internal/proxytest"
)

// meshProxy is one pod's proxy, in process (proxy.New and a run.Group, as `meridian proxy`
// assembles it): inbound on <pod ip>:4143, outbound on <pod ip>:4140.
type meshProxy struct {
	pod   pod
	reg   *prometheus.Registry
	group *run.Group
}

// proxyConfig is the LINKERD2_PROXY_* configuration of p's proxy on one machine.
func (cp *controlPlane) proxyConfig(p pod, destination string) config.Config {
	cfg := config.Default()
	cfg.InboundAddr, cfg.OutboundAddr = p.inboundAddr(), p.outboundAddr()
	cfg.DestinationAddr = destination
	cfg.DestinationContext = fmt.Sprintf(`{"ns":%q,"nodeName":"local","pod":%q}`, ns, p.name)
	cfg.PolicyAddr, cfg.PolicyWorkload = cp.policyAddr, p.workload()
	cfg.IdentityAddr, cfg.LocalName = cp.identityAddr, p.identity()
	cfg.TrustAnchors, cfg.TokenFile = cp.anchors, cp.token(p.sa)
	if p.port != 0 {
		cfg.InboundPorts = []uint16{p.port}
	}
	cfg.ShutdownGracePeriod = time.Second
	// The test's control plane serves plaintext, reached off the proxy's network namespace.
	cfg.InsecureControlPlane = true
	// Targets no request uses are released after 1 s (Linkerd's 5 s): a test that counts a
	// replica's streams sees only the targets in use.
	cfg.OutboundDiscoveryIdleTimeout = time.Second
	return cfg
}

// startProxy runs p's proxy until the test ends and waits until it is ready (it holds its
// certificate).
func (cp *controlPlane) startProxy(p pod, destination string) *meshProxy {
	t := cp.t
	t.Helper()
	mp := &meshProxy{pod: p, reg: prometheus.NewRegistry(), group: &run.Group{}}
	px, err := proxy.New(cp.proxyConfig(p, destination), proxy.Deps{Registerer: mp.reg, Logger: logger(t, "proxy-"+p.name)})
	if err != nil {
		t.Fatalf("proxy %s: %v", p.name, err)
	}
	px.Add(mp.group)
	testutil.Go(t, "proxy "+p.name, mp.group.Run)
	testutil.EventuallyNoError(t, within, "proxy "+p.name+" ready", mp.group.Ready)
	return mp
}

// metric sums the proxy's series of family name whose labels include want.
func (mp *meshProxy) metric(t *testing.T, name string, want map[string]string) float64 {
	return proxytest.Gathered(t, mp.reg, name, want)
}

// client is an application using a proxy's outbound as its explicit HTTP proxy (curl -x).
type client struct {
	t     *testing.T
	proxy string // host:port
	http  *http.Client
}

func newClient(t *testing.T, proxyAddr string) *client {
	tr := &http.Transport{Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: proxyAddr}), MaxIdleConnsPerHost: 16}
	t.Cleanup(tr.CloseIdleConnections)
	return &client{t: t, proxy: proxyAddr, http: &http.Client{Transport: tr, Timeout: 10 * time.Second}}
}

// get sends GET url with the extra headers (key, value pairs) and returns the status and
// the echo's reply (zero unless 200; then the body is in reply.Remote).
func (c *client) get(rawURL string, headers ...string) (int, echoReply, error) {
	req, err := http.NewRequest(http.MethodGet, rawURL, nil)
	if err != nil {
		return 0, echoReply{}, err
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, echoReply{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, echoReply{}, fmt.Errorf("read the body: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, echoReply{Remote: string(body)}, nil
	}
	var r echoReply
	return resp.StatusCode, r, jsonUnmarshal(body, &r)
}

// mustGet is get that fails the test on a transport error.
func (c *client) mustGet(rawURL string, headers ...string) (int, echoReply) {
	c.t.Helper()
	code, r, err := c.get(rawURL, headers...)
	if err != nil {
		c.t.Fatalf("GET %s through %s: %v", rawURL, c.proxy, err)
	}
	return code, r
}

// connect opens a tunnel to authority with HTTP CONNECT through the proxy.
func (c *client) connect(authority string) (net.Conn, *bufio.Reader, error) {
	conn, err := net.DialTimeout("tcp", c.proxy, 5*time.Second)
	if err != nil {
		return nil, nil, err
	}
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := fmt.Fprintf(conn, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", authority, authority); err != nil {
		_ = conn.Close()
		return nil, nil, err
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		_ = conn.Close()
		return nil, nil, fmt.Errorf("CONNECT %s: %w", authority, err)
	}
	if resp.StatusCode != http.StatusOK {
		_ = conn.Close()
		return nil, nil, fmt.Errorf("CONNECT %s: %s", authority, resp.Status)
	}
	return conn, br, nil
}

// lineEcho sends line over a tunnel to the TCP echo and returns its answer.
func lineEcho(conn net.Conn, br *bufio.Reader, line string) (string, error) {
	if _, err := io.WriteString(conn, line+"\n"); err != nil {
		return "", err
	}
	got, err := br.ReadString('\n')
	if err != nil {
		return got, err
	}
	return got[:len(got)-1], nil
}

// traffic sends GET url at rate per second from a goroutine of its own until stop is
// called, and then reports every request's outcome.
type traffic struct {
	stop    context.CancelFunc
	results chan []outcome
	done    chan struct{}
	sent    atomic.Int64 // requests answered (or failed) so far
}

type outcome struct {
	status int
	pod    string
	err    error
}

func startTraffic(c *client, rawURL string, every time.Duration) *traffic {
	ctx, cancel := context.WithCancel(context.Background())
	tr := &traffic{stop: cancel, results: make(chan []outcome, 1), done: make(chan struct{})}
	go func() {
		defer close(tr.done)
		var out []outcome
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				tr.results <- out
				return
			case <-tick.C:
				code, r, err := c.get(rawURL)
				out = append(out, outcome{code, r.Pod, err})
				tr.sent.Add(1)
			}
		}
	}()
	c.t.Cleanup(func() {
		cancel()
		testutil.Wait(c.t, within, "the traffic to stop", func() { <-tr.done })
	})
	return tr
}

// end stops the traffic and returns its outcomes.
func (tr *traffic) end(t *testing.T) []outcome {
	tr.stop()
	return testutil.Recv(t, tr.results, within, "the traffic's outcomes")
}

// seriesRE matches a sample line of the Prometheus text format: name{labels} value.
var (
	seriesRE = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)`)
	labelRE  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)
)

// textMetric sums the samples of family name (a counter or gauge; a histogram's _count)
// in a /metrics page whose labels include want.
func textMetric(text, name string, want map[string]string) float64 {
	sum := 0.0
lines:
	for _, line := range strings.Split(text, "\n") {
		m := seriesRE.FindStringSubmatch(line)
		if m == nil || m[1] != name {
			continue
		}
		labels := map[string]string{}
		for _, l := range labelRE.FindAllStringSubmatch(m[2], -1) {
			labels[l[1]] = l[2]
		}
		for k, v := range want {
			if labels[k] != v {
				continue lines
			}
		}
		if v, err := strconv.ParseFloat(m[3], 64); err == nil {
			sum += v
		}
	}
	return sum
}

func jsonUnmarshal(b []byte, v any) error {
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("reply %q: %w", b, err)
	}
	return nil
}
