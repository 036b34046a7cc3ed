package metrics

import (
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// TLS label values, as linkerd2-proxy writes them.
const (
	TLSTrue       = "true"        // mTLS with a verified peer identity
	TLSNoIdentity = "no_identity" // plaintext, or TLS without a client identity
)

// dstKeys are the discovery metric labels kept, each exported as dst_<key>.
var dstKeys = []string{"namespace", "service", "pod", "serviceaccount", "deployment", "statefulset",
	"daemonset", "pod_template_hash", "control_plane_ns", "zone"}

// baseNames are the labels every family carries, in order.
var baseNames = func() []string {
	n := []string{"direction", "authority", "tls", "client_id", "server_id", "srv_name"}
	for _, k := range dstKeys {
		n = append(n, "dst_"+k)
	}
	return n
}()

// Labels are what identifies a route or a connection.
type Labels struct {
	Direction string // "inbound" or "outbound"
	Authority string // the target authority (host:port)
	TLS       string // TLSTrue or TLSNoIdentity
	ClientID  string // inbound: the client's identity
	ServerID  string // outbound: the server's identity
	SrvName   string // inbound: the policy Server's name
	// Dst are discovery's metric labels of the target (set labels and the endpoint's own):
	// namespace, service, pod, ... (unknown keys are dropped).
	Dst map[string]string
}

func (l Labels) values(extra ...string) []string {
	v := make([]string, 0, len(baseNames)+len(extra))
	v = append(v, l.Direction, l.Authority, l.TLS, l.ClientID, l.ServerID, l.SrvName)
	for _, k := range dstKeys {
		v = append(v, l.Dst[k])
	}
	return append(v, extra...)
}

func (l Labels) key() string { return strings.Join(l.values(), "\x00") }

// LatencyBuckets are linkerd2-proxy's response_latency_ms buckets.
var LatencyBuckets = []float64{1, 2, 3, 4, 5, 10, 20, 30, 40, 50, 100, 200, 300, 400, 500,
	1000, 2000, 3000, 4000, 5000, 10000, 20000, 30000, 40000, 50000}

// Metrics is the proxy's metric families. Safe for concurrent use.
type Metrics struct {
	requests  *prometheus.CounterVec
	responses *prometheus.CounterVec
	latency   *prometheus.HistogramVec

	tcpOpen, tcpClose   *prometheus.CounterVec
	tcpOpenConns        *prometheus.GaugeVec
	tcpRead, tcpWrite   *prometheus.CounterVec
	httpAllow, httpDeny *prometheus.CounterVec
	tcpAllow, tcpDeny   *prometheus.CounterVec
	routes              handles[*Route]
	conns               handles[*TCP]
	maxRoutes           int64 // of routes, and of kinds of connection
}

// handles caches the handles of series by their labels (Labels.key()), and counts them.
type handles[T any] struct {
	m sync.Map
	n atomic.Int64
}

// get returns the handle of l, made by mk on first use. l's authority is bounded: longer
// than MaxAuthority it reads AuthorityInvalid, and once max handles exist a new l counts as
// overflow(l).
func (h *handles[T]) get(l Labels, max int64, mk func(Labels) T) T {
	if len(l.Authority) > MaxAuthority {
		l.Authority = AuthorityInvalid
	}
	k := l.key()
	if v, ok := h.m.Load(k); ok {
		return v.(T)
	}
	if h.n.Load() >= max && (l.Authority != AuthorityOther || l.Dst != nil) {
		l = overflow(l)
		k = l.key()
		if v, ok := h.m.Load(k); ok {
			return v.(T)
		}
	}
	v, loaded := h.m.LoadOrStore(k, mk(l))
	if !loaded {
		h.n.Add(1)
	}
	return v.(T)
}

// Bounds of the authority label, which a client chooses (an inbound request's Host): its
// series are never dropped, so neither one authority nor the number of them may grow the
// proxy's memory without bound.
const (
	// MaxAuthority is the longest authority label kept (a DNS name and a port); a longer one
	// reads AuthorityInvalid.
	MaxAuthority = 253 + len(":65535")
	// MaxRoutes bounds the routes with series of their own, and the kinds of connection
	// (TCP); one not seen before, beyond it, reads AuthorityOther, without dst_* labels (a
	// pod's name would make a series of each).
	MaxRoutes = 4096
	// AuthorityInvalid and AuthorityOther stand in for those authorities.
	AuthorityInvalid = "invalid"
	AuthorityOther   = "other"
)

// New returns the metrics, registered on reg (nil: not registered).
func New(reg prometheus.Registerer) *Metrics {
	resp := append(append([]string{}, baseNames...), "status_code", "grpc_status", "classification")
	authz := []string{"direction", "srv_name", "authz_name", "client_id", "tls"}
	m := &Metrics{
		maxRoutes: MaxRoutes,
		requests:  prometheus.NewCounterVec(prometheus.CounterOpts{Name: "request_total", Help: "Total count of HTTP requests."}, baseNames),
		responses: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "response_total", Help: "Total count of HTTP responses."}, resp),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "response_latency_ms",
			Help: "Elapsed times between a request's headers being received and its response stream completing, in milliseconds.", Buckets: LatencyBuckets},
			append(append([]string{}, baseNames...), "status_code")),
		tcpOpen:      prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tcp_open_total", Help: "Total count of opened connections."}, baseNames),
		tcpClose:     prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tcp_close_total", Help: "Total count of closed connections."}, append(append([]string{}, baseNames...), "classification")),
		tcpOpenConns: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "tcp_open_connections", Help: "Number of currently-open connections."}, baseNames),
		tcpRead:      prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tcp_read_bytes_total", Help: "Total count of bytes read from peers."}, baseNames),
		tcpWrite:     prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tcp_write_bytes_total", Help: "Total count of bytes written to peers."}, baseNames),
		httpAllow:    prometheus.NewCounterVec(prometheus.CounterOpts{Name: "inbound_http_authz_allow_total", Help: "The total number of inbound HTTP requests that were authorized."}, authz),
		httpDeny:     prometheus.NewCounterVec(prometheus.CounterOpts{Name: "inbound_http_authz_deny_total", Help: "The total number of inbound HTTP requests that could not be processed due to a proxy authorization policy."}, authz),
		tcpAllow:     prometheus.NewCounterVec(prometheus.CounterOpts{Name: "inbound_tcp_authz_allow_total", Help: "The total number of inbound TCP connections that were authorized."}, authz),
		tcpDeny:      prometheus.NewCounterVec(prometheus.CounterOpts{Name: "inbound_tcp_authz_deny_total", Help: "The total number of inbound TCP connections that were denied."}, authz),
	}
	if reg != nil {
		reg.MustRegister(m.requests, m.responses, m.latency, m.tcpOpen, m.tcpClose, m.tcpOpenConns,
			m.tcpRead, m.tcpWrite, m.httpAllow, m.httpDeny, m.tcpAllow, m.tcpDeny)
	}
	return m
}

// Route is the series of one HTTP route (one Labels). Safe for concurrent use.
type Route struct {
	m        *Metrics
	values   []string
	requests prometheus.Counter

	mu        sync.RWMutex
	responses map[respKey]*response
}

type respKey struct {
	status int
	grpc   string
	failed bool
}

type response struct {
	total   prometheus.Counter
	latency prometheus.Observer
}

// Route returns the handle of the route l, creating its series on first use. Its authority
// is bounded as MaxAuthority and MaxRoutes say.
func (m *Metrics) Route(l Labels) *Route {
	return m.routes.get(l, m.maxRoutes, func(l Labels) *Route {
		v := l.values()
		return &Route{m: m, values: v, requests: m.requests.WithLabelValues(v...), responses: map[respKey]*response{}}
	})
}

// overflow is l as a route or connection beyond the bound counts it: authority "other", no
// dst_* labels.
func overflow(l Labels) Labels {
	l.Authority, l.Dst = AuthorityOther, nil
	return l
}

// Request counts one request.
func (r *Route) Request() { r.requests.Inc() }

// Response counts one response with its HTTP status (0 when the request failed without one),
// its grpc-status ("" for plain HTTP), whether it failed (5xx, a non-OK grpc-status, or no
// response) and the time from the request's headers to the end of the response.
func (r *Route) Response(status int, grpcStatus string, failed bool, latency time.Duration) {
	k := respKey{status, grpcStatus, failed}
	r.mu.RLock()
	resp := r.responses[k]
	r.mu.RUnlock()
	if resp == nil {
		resp = r.newResponse(k)
	}
	resp.total.Inc()
	resp.latency.Observe(float64(latency) / float64(time.Millisecond))
}

func (r *Route) newResponse(k respKey) *response {
	class := "success"
	if k.failed {
		class = "failure"
	}
	code := ""
	if k.status > 0 {
		code = strconv.Itoa(k.status)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if resp := r.responses[k]; resp != nil {
		return resp
	}
	resp := &response{
		total:   r.m.responses.WithLabelValues(append(append([]string{}, r.values...), code, k.grpc, class)...),
		latency: r.m.latency.WithLabelValues(append(append([]string{}, r.values...), code)...),
	}
	r.responses[k] = resp
	return resp
}

// TCP is the series of one kind of connection (one Labels). Safe for concurrent use.
type TCP struct {
	open                  prometheus.Counter
	openConns             prometheus.Gauge
	read, written         prometheus.Counter
	closedOK, closedError prometheus.Counter
}

// TCP returns the handle of the connections l, creating their series on first use. Its
// labels are bounded as Route's are.
func (m *Metrics) TCP(l Labels) *TCP {
	return m.conns.get(l, m.maxRoutes, func(l Labels) *TCP {
		v := l.values()
		return &TCP{
			open:        m.tcpOpen.WithLabelValues(v...),
			openConns:   m.tcpOpenConns.WithLabelValues(v...),
			read:        m.tcpRead.WithLabelValues(v...),
			written:     m.tcpWrite.WithLabelValues(v...),
			closedOK:    m.tcpClose.WithLabelValues(append(append([]string{}, v...), "success")...),
			closedError: m.tcpClose.WithLabelValues(append(append([]string{}, v...), "failure")...),
		}
	})
}

// Open counts a connection opened.
func (t *TCP) Open() { t.open.Inc(); t.openConns.Inc() }

// Read and Wrote count bytes read from and written to the peer; call them as data flows
// (per copy chunk) so that long connections show their traffic.
func (t *TCP) Read(n int64)  { t.read.Add(float64(n)) }
func (t *TCP) Wrote(n int64) { t.written.Add(float64(n)) }

// Close counts a connection closed, failed when it ended with an error.
func (t *TCP) Close(failed bool) {
	t.openConns.Dec()
	if failed {
		t.closedError.Inc()
	} else {
		t.closedOK.Inc()
	}
}

// Authz are the labels of an authorization decision.
type Authz struct {
	SrvName, AuthzName, ClientID, TLS string
}

// HTTPAuthz counts an inbound HTTP request allowed or denied by policy.
func (m *Metrics) HTTPAuthz(allow bool, a Authz) {
	vec := m.httpDeny
	if allow {
		vec = m.httpAllow
	}
	vec.WithLabelValues("inbound", a.SrvName, a.AuthzName, a.ClientID, a.TLS).Inc()
}

// TCPAuthz counts an inbound connection allowed or denied by policy.
func (m *Metrics) TCPAuthz(allow bool, a Authz) {
	vec := m.tcpDeny
	if allow {
		vec = m.tcpAllow
	}
	vec.WithLabelValues("inbound", a.SrvName, a.AuthzName, a.ClientID, a.TLS).Inc()
}
