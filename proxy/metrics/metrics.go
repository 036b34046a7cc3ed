package metrics

import (
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

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

// clean returns l with every label value Prometheus can take: a value that is not UTF-8
// (Prometheus panics on one; a client chooses an inbound request's Host, and a peer the
// bytes of what it sends) reads AuthorityInvalid, and so does an authority longer than
// MaxAuthority. l's Dst map is copied only when one of its values is replaced.
func (l Labels) clean() Labels {
	if len(l.Authority) > MaxAuthority || !utf8.ValidString(l.Authority) {
		l.Authority = AuthorityInvalid
	}
	for _, v := range []*string{&l.Direction, &l.TLS, &l.ClientID, &l.ServerID, &l.SrvName} {
		*v = label(*v)
	}
	for k, v := range l.Dst {
		if !utf8.ValidString(v) || !utf8.ValidString(k) {
			dst := make(map[string]string, len(l.Dst))
			for k, v := range l.Dst {
				dst[label(k)] = label(v)
			}
			l.Dst = dst
			break
		}
	}
	return l
}

// label is v, or AuthorityInvalid when v is not UTF-8.
func label(v string) string {
	if utf8.ValidString(v) {
		return v
	}
	return AuthorityInvalid
}

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
	// The series of routes and of kinds of connection, by direction (inbound, outbound):
	// each direction has its own bound, so that what inbound clients send cannot take the
	// outbound series' places.
	routes    [2]table[*routeSeries]
	conns     [2]table[*tcpSeries]
	maxRoutes int64 // of routes, and of kinds of connection, per direction

	now       func() int64 // the time in nanoseconds; tests replace it
	lastSweep atomic.Int64 // when get last swept at the bound
}

// table holds the live series of one family group by their labels (Labels.key()), and
// counts them.
type table[T evictable] struct {
	m sync.Map // key -> T
	n atomic.Int64
}

// evictable is a set of series (a routeSeries, a tcpSeries) that a sweep can drop.
type evictable interface {
	base() *entry
	// drop deletes the series from their vectors, unless they are in use (a connection
	// open), and says whether it did. Its caller holds entry.mu and has marked them dead.
	drop() bool
}

// entry is what every set of series has for its eviction. Callers keep handles (Route,
// TCP), which point at a set of series; a set that a sweep drops is dead, and a handle that
// finds its set dead asks the table for the live one of its labels (made anew, within the
// bound). A table holds one live set a key, so every handle of a key counts into it.
//
// A use only marks the set touched (no clock is read on the request path); each sweep clears
// the mark and notes the time it saw one, so a set is idle when no sweep has seen it used for
// RetainIdle. /metrics being read is what sweeps, so the idle time is known to within a
// scrape interval, and never short of RetainIdle.
type entry struct {
	key     string
	touched atomic.Bool  // used since the last sweep
	seen    atomic.Int64 // Metrics.now() when a sweep last found it touched (or it was made)
	mu      sync.Mutex   // held by the eviction, from marking it dead to leaving the table
	dead    atomic.Bool
}

func (e *entry) base() *entry { return e }

// use marks the set used and reports whether it is dead, in which case the caller counts
// into the live set of its labels instead. The order (touched set, then dead read) pairs
// with evict's (dead set, then touched read): a use that evict does not see sees the set
// dead, so nothing is counted into series that were dropped.
func (e *entry) use() (dead bool) {
	if !e.touched.Load() {
		e.touched.Store(true)
	}
	return e.dead.Load()
}

// alive reports whether e is not dead, waiting for an eviction under way to end (after it,
// a dead set has left its table).
func (e *entry) alive() bool {
	if !e.dead.Load() {
		return true
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return !e.dead.Load()
}

// handle is what Route and TCP are: the labels of a set of series S (a pointer to E), and the
// live set they count into (see entry).
type handle[E any, S interface {
	*E
	evictable
}] struct {
	m   *Metrics
	l   Labels // cleaned
	t   *table[S]
	mk  func(Labels) S
	cur atomic.Pointer[E]
}

func (h *handle[E, S]) init(m *Metrics, l Labels, t *table[S], mk func(Labels) S, s S) {
	h.m, h.l, h.t, h.mk = m, l, t, mk
	h.cur.Store(s)
}

// current returns the live series h counts into: its own, or, once they were dropped, those
// of its labels made anew (past the bound, the overflow's).
func (h *handle[E, S]) current() S {
	s := S(h.cur.Load())
	for s.base().use() {
		s = h.live()
	}
	return s
}

// live points h at the table's live set of its labels, and returns it.
func (h *handle[E, S]) live() S {
	s := h.t.get(h.m, h.l, h.mk)
	h.cur.Store(s)
	return s
}

// get returns the live series of l (cleaned), made by mk on first use. Once max sets exist
// a new l counts as overflow(l), after m has dropped idle ones.
func (t *table[T]) get(m *Metrics, l Labels, mk func(Labels) T) T {
	k := l.key()
	for {
		if v, ok := t.m.Load(k); ok {
			if s := v.(T); s.base().alive() {
				return s
			}
			continue // evicted: gone from the table now
		}
		if t.n.Load() >= m.maxRoutes && (l.Authority != AuthorityOther || l.Dst != nil) {
			m.sweepAtBound()
			if t.n.Load() >= m.maxRoutes {
				l = overflow(l)
				k = l.key()
				continue
			}
		}
		s := mk(l)
		e := s.base()
		e.key = k
		e.seen.Store(m.now())
		if _, loaded := t.m.LoadOrStore(k, s); !loaded {
			t.n.Add(1)
			return s
		}
	}
}

// sweep drops the sets no sweep has seen used for RetainIdle, as of now.
func (t *table[T]) sweep(now int64) {
	t.m.Range(func(k, v any) bool {
		s := v.(T)
		e := s.base()
		e.mu.Lock()
		defer e.mu.Unlock()
		switch {
		case e.dead.Load():
		case e.touched.Swap(false):
			e.seen.Store(now)
		case now-e.seen.Load() < int64(RetainIdle):
		default:
			e.dead.Store(true)
			if e.touched.Load() || !s.drop() {
				e.dead.Store(false)
			} else if t.m.CompareAndDelete(k, v) {
				t.n.Add(-1)
			}
		}
		return true
	})
}

// RetainIdle is how long the series of a route or of a kind of connection are kept while
// nothing uses them: linkerd2-proxy's default (its LINKERD2_PROXY_METRICS_RETAIN_IDLE). So
// the series of pods long gone, and of what clients sent once, do not stay for the proxy's
// life, nor hold the places MaxRoutes bounds. A kind of connection with one open is never
// idle. Series are dropped when /metrics is read, and when a new route meets the bound; the
// idle time is what those sweeps saw (see entry).
const RetainIdle = 10 * time.Minute

// sweep drops the series idle for RetainIdle.
func (m *Metrics) sweep() {
	now := m.now()
	for d := range m.routes {
		m.routes[d].sweep(now)
		m.conns[d].sweep(now)
	}
}

// sweepAtBound sweeps when a new route meets the bound, at most once a second: a flood of
// new authorities must not make each one walk every handle.
func (m *Metrics) sweepAtBound() {
	now, last := m.now(), m.lastSweep.Load()
	if now-last < int64(time.Second) || !m.lastSweep.CompareAndSwap(last, now) {
		return
	}
	m.sweep()
}

// direction is the index of a direction in Metrics.routes and Metrics.conns.
func direction(d string) int {
	if d == "inbound" {
		return 0
	}
	return 1
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
		now:       func() int64 { return time.Now().UnixNano() },
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
		reg.MustRegister(families{m, []prometheus.Collector{m.requests, m.responses, m.latency, m.tcpOpen, m.tcpClose, m.tcpOpenConns,
			m.tcpRead, m.tcpWrite, m.httpAllow, m.httpDeny, m.tcpAllow, m.tcpDeny}})
	}
	return m
}

// families collects m's families, after dropping the idle series.
type families struct {
	m  *Metrics
	cs []prometheus.Collector
}

func (f families) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range f.cs {
		c.Describe(ch)
	}
}

func (f families) Collect(ch chan<- prometheus.Metric) {
	f.m.sweep()
	for _, c := range f.cs {
		c.Collect(ch)
	}
}

// Route is the handle of one HTTP route's series (one Labels). Safe for concurrent use, and
// valid for as long as a caller keeps it.
type Route struct {
	handle[routeSeries, *routeSeries]
}

// routeSeries are the series of a route while they live (see entry).
type routeSeries struct {
	entry
	m        *Metrics
	values   []string
	handle   *Route // what Route returns for them
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

// Route returns the handle of the route l, creating its series on first use. Its labels are
// bounded as MaxAuthority and MaxRoutes say.
func (m *Metrics) Route(l Labels) *Route {
	l = l.clean()
	return m.routes[direction(l.Direction)].get(m, l, m.newRoute).handle
}

func (m *Metrics) newRoute(l Labels) *routeSeries {
	v := l.values()
	s := &routeSeries{m: m, values: v, requests: m.requests.WithLabelValues(v...), responses: map[respKey]*response{}}
	s.handle = new(Route)
	s.handle.init(m, l, &m.routes[direction(l.Direction)], m.newRoute, s)
	return s
}

func (s *routeSeries) drop() bool {
	s.m.requests.DeleteLabelValues(s.values...)
	s.mu.RLock()
	defer s.mu.RUnlock()
	for k := range s.responses {
		code, class := k.labels()
		s.m.responses.DeleteLabelValues(append(append([]string{}, s.values...), code, k.grpc, class)...)
		s.m.latency.DeleteLabelValues(append(append([]string{}, s.values...), code)...)
	}
	return true
}

// overflow is l as a route or connection beyond the bound counts it: authority "other", no
// dst_* labels.
func overflow(l Labels) Labels {
	l.Authority, l.Dst = AuthorityOther, nil
	return l
}

// Request counts one request.
func (r *Route) Request() { r.current().requests.Inc() }

// Response counts one response with its HTTP status (0 when the request failed without one),
// its grpc-status ("" for plain HTTP; anything but a code from 0 to 16 counts as 2, UNKNOWN,
// as gRPC reads a status it does not know), whether it failed (5xx, a non-OK grpc-status, or
// no response) and the time from the request's headers to the end of the response.
func (r *Route) Response(status int, grpcStatus string, failed bool, latency time.Duration) {
	k := respKey{status, grpcCode(grpcStatus), failed}
	s := r.current()
	s.mu.RLock()
	resp := s.responses[k]
	s.mu.RUnlock()
	if resp == nil {
		resp = s.newResponse(k)
	}
	resp.total.Inc()
	resp.latency.Observe(float64(latency) / float64(time.Millisecond))
}

// grpcCode is the grpc_status label of a grpc-status value: the code, when it is one of
// gRPC's (0 to 16), else 2 (UNKNOWN). The label is bounded whatever a peer sends.
func grpcCode(s string) string {
	if s == "" {
		return ""
	}
	if n, err := strconv.Atoi(s); err == nil && n >= 0 && n <= 16 && strconv.Itoa(n) == s {
		return s
	}
	return "2"
}

func (k respKey) labels() (code, class string) {
	class = "success"
	if k.failed {
		class = "failure"
	}
	if k.status > 0 {
		code = strconv.Itoa(k.status)
	}
	return code, class
}

func (s *routeSeries) newResponse(k respKey) *response {
	code, class := k.labels()
	s.mu.Lock()
	defer s.mu.Unlock()
	if resp := s.responses[k]; resp != nil {
		return resp
	}
	resp := &response{
		total:   s.m.responses.WithLabelValues(append(append([]string{}, s.values...), code, k.grpc, class)...),
		latency: s.m.latency.WithLabelValues(append(append([]string{}, s.values...), code)...),
	}
	s.responses[k] = resp
	return resp
}

// TCP is the handle of one kind of connection's series (one Labels). Safe for concurrent
// use, and valid for as long as a caller keeps it.
type TCP struct{ handle[tcpSeries, *tcpSeries] }

// tcpSeries are the series of a kind of connection while they live (see entry).
type tcpSeries struct {
	entry
	m      *Metrics
	values []string
	handle *TCP         // what TCP returns for them
	open   atomic.Int64 // connections open: while any is, they are not dropped

	opened                prometheus.Counter
	openConns             prometheus.Gauge
	read, written         prometheus.Counter
	closedOK, closedError prometheus.Counter
}

// TCP returns the handle of the connections l, creating their series on first use. Its
// labels are bounded as Route's are.
func (m *Metrics) TCP(l Labels) *TCP {
	l = l.clean()
	return m.conns[direction(l.Direction)].get(m, l, m.newTCP).handle
}

func (m *Metrics) newTCP(l Labels) *tcpSeries {
	v := l.values()
	s := &tcpSeries{
		m: m, values: v,
		opened:      m.tcpOpen.WithLabelValues(v...),
		openConns:   m.tcpOpenConns.WithLabelValues(v...),
		read:        m.tcpRead.WithLabelValues(v...),
		written:     m.tcpWrite.WithLabelValues(v...),
		closedOK:    m.tcpClose.WithLabelValues(append(append([]string{}, v...), "success")...),
		closedError: m.tcpClose.WithLabelValues(append(append([]string{}, v...), "failure")...),
	}
	s.handle = new(TCP)
	s.handle.init(m, l, &m.conns[direction(l.Direction)], m.newTCP, s)
	return s
}

func (s *tcpSeries) drop() bool {
	if s.open.Load() > 0 {
		return false
	}
	v, m := s.values, s.m
	for _, vec := range []*prometheus.CounterVec{m.tcpOpen, m.tcpRead, m.tcpWrite} {
		vec.DeleteLabelValues(v...)
	}
	m.tcpOpenConns.DeleteLabelValues(v...)
	for _, class := range []string{"success", "failure"} {
		m.tcpClose.DeleteLabelValues(append(append([]string{}, v...), class)...)
	}
	return true
}

// Open counts a connection opened; Close must be called on the same handle when it ends.
func (t *TCP) Open() {
	// The connection is counted open on the series before they are used, so that no sweep
	// drops them from then on (drop sees it, or the use sees them dead and tries the next).
	s := t.cur.Load()
	for {
		s.open.Add(1)
		if !s.use() {
			break
		}
		s.open.Add(-1)
		s = t.live()
	}
	s.opened.Inc()
	s.openConns.Inc()
}

// Read and Wrote count bytes read from and written to the peer; call them as data flows
// (per copy chunk) so that long connections show their traffic.
func (t *TCP) Read(n int64)  { t.current().read.Add(float64(n)) }
func (t *TCP) Wrote(n int64) { t.current().written.Add(float64(n)) }

// Close counts a connection closed, failed when it ended with an error. The series its Open
// counted on are still t's: series with a connection open are never dropped.
func (t *TCP) Close(failed bool) {
	s := t.current()
	s.openConns.Dec()
	if failed {
		s.closedError.Inc()
	} else {
		s.closedOK.Inc()
	}
	s.open.Add(-1)
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
	vec.WithLabelValues("inbound", label(a.SrvName), label(a.AuthzName), label(a.ClientID), label(a.TLS)).Inc()
}

// TCPAuthz counts an inbound connection allowed or denied by policy.
func (m *Metrics) TCPAuthz(allow bool, a Authz) {
	vec := m.tcpDeny
	if allow {
		vec = m.tcpAllow
	}
	vec.WithLabelValues("inbound", label(a.SrvName), label(a.AuthzName), label(a.ClientID), label(a.TLS)).Inc()
}
