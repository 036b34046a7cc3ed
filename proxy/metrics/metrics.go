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
	// The handles of routes and of kinds of connection, by direction (inbound, outbound):
	// each direction has its own bound, so that what inbound clients send cannot take the
	// outbound series' places.
	routes    [2]handles[*Route]
	conns     [2]handles[*TCP]
	maxRoutes int64 // of routes, and of kinds of connection, per direction

	now       func() int64 // the time in nanoseconds; tests replace it
	lastSweep atomic.Int64 // when get last swept at the bound
}

// handles caches the handles of series by their labels (Labels.key()), and counts them.
type handles[T evictable] struct {
	m sync.Map // key -> T
	n atomic.Int64
}

// evictable is a handle whose series sweep can drop.
type evictable interface {
	base() *entry
	// drop deletes the handle's series, unless it is in use (a connection open), and says
	// whether it did. Its caller holds entry.mu and has marked it evicted.
	drop() bool
}

// entry is what every handle has for its eviction: a handle stays valid when its series are
// dropped, and its next use makes them again, so callers may keep handles. When another
// handle of the same labels was made meanwhile (a caller asked for them while they were
// dropped), the handle stands for that one from then on (its alias), so that one handle
// alone counts into a series, and one sweep drops it.
//
// A use only marks the handle touched (no clock is read on the request path); each sweep
// clears the mark and notes the time it saw one, so a handle is idle when no sweep has seen
// it used for RetainIdle. /metrics being read is what sweeps, so the idle time is known to
// within a scrape interval, and never short of RetainIdle.
type entry struct {
	key     string
	dir     int
	touched atomic.Bool  // used since the last sweep
	seen    atomic.Int64 // Metrics.now() when a sweep last found it touched (or it was made)
	mu      sync.Mutex   // evictions and revivals of the handle
	evicted atomic.Bool
}

func (e *entry) base() *entry { return e }

// use marks the handle used and reports whether its series were dropped, in which case the
// caller makes them again before it counts. The order (touched set, then evicted read)
// pairs with evict's (evicted set, then touched read): a use that evict does not see sees
// the eviction, so nothing is counted into a dropped series.
func (e *entry) use() (revive bool) {
	if !e.touched.Load() {
		e.touched.Store(true)
	}
	return e.evicted.Load()
}

// evict drops h's series if no sweep has seen it used for RetainIdle, as of now.
func evict[T evictable](h T, now int64) bool {
	e := h.base()
	if e.touched.Swap(false) {
		e.seen.Store(now)
		return false
	}
	if now-e.seen.Load() < int64(RetainIdle) {
		return false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.evicted.Load() {
		return false
	}
	e.evicted.Store(true)
	if e.touched.Load() || !h.drop() {
		e.evicted.Store(false)
		return false
	}
	return true
}

// kept is what a handle that callers keep (Route, TCP) has besides its labels: the entry
// sweeps read, its series S (made again after they were dropped), and the handle H it
// stands for once another was made for its labels (its alias; see entry).
type kept[H, S any] struct {
	entry
	series atomic.Pointer[S]
	alias  atomic.Pointer[H]
}

// init sets up the kept part of h, a handle of direction dir with series s, and returns h.
func (k *kept[H, S]) init(h *H, dir int, s *S) *H {
	k.dir = dir
	k.series.Store(s)
	return h
}

// follow returns the handle h counts for and its series: the end of h's aliases, whose
// series remake makes again if they were dropped. readd puts a handle whose series were
// dropped back in its table and returns the one there: another, made meanwhile, becomes the
// handle's alias.
func follow[H, S any](h *H, k func(*H) *kept[H, S], readd func(*H) *H, remake func(*H) *S) (*H, *S) {
	for {
		kh := k(h)
		if a := kh.alias.Load(); a != nil {
			h = a
			continue
		}
		if !kh.use() {
			return h, kh.series.Load()
		}
		kh.mu.Lock()
		if kh.evicted.Load() {
			if got := readd(h); got != h {
				kh.alias.Store(got)
				kh.mu.Unlock()
				h = got
				continue
			}
			kh.series.Store(remake(h))
			kh.evicted.Store(false)
		}
		kh.mu.Unlock()
		return h, kh.series.Load()
	}
}

// get returns the handle of l, made by mk on first use. l's labels are cleaned (clean), and
// once max handles exist a new l counts as overflow(l), after m has dropped idle ones.
func (h *handles[T]) get(m *Metrics, l Labels, mk func(Labels) T) T {
	l = l.clean()
	k := l.key()
	if v, ok := h.m.Load(k); ok {
		return v.(T)
	}
	if h.n.Load() >= m.maxRoutes && (l.Authority != AuthorityOther || l.Dst != nil) {
		m.sweepAtBound()
		if h.n.Load() >= m.maxRoutes {
			l = overflow(l)
			k = l.key()
			if v, ok := h.m.Load(k); ok {
				return v.(T)
			}
		}
	}
	return h.add(m, k, mk(l))
}

// add stores v under k unless a handle is there already, which it returns instead.
func (h *handles[T]) add(m *Metrics, k string, v T) T {
	e := v.base()
	e.key = k
	e.seen.Store(m.now())
	got, loaded := h.m.LoadOrStore(k, v)
	if !loaded {
		h.n.Add(1)
	}
	return got.(T)
}

// sweep drops the handles idle for RetainIdle as of now.
func (h *handles[T]) sweep(now int64) {
	h.m.Range(func(k, v any) bool {
		if evict(v.(T), now) && h.m.CompareAndDelete(k, v) {
			h.n.Add(-1)
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

// Route is the handle of one HTTP route's series (one Labels). Safe for concurrent use.
type Route struct {
	kept[Route, routeSeries]
	m      *Metrics
	values []string
}

type routeSeries struct {
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
	d := direction(l.Direction)
	return m.routes[d].get(m, l, func(l Labels) *Route {
		r := &Route{m: m, values: l.values()}
		return r.init(r, d, r.newSeries())
	})
}

func (r *Route) newSeries() *routeSeries {
	return &routeSeries{requests: r.m.requests.WithLabelValues(r.values...), responses: map[respKey]*response{}}
}

// current returns the series r counts into: its own, made again if they were dropped, or
// its alias's.
func (r *Route) current() *routeSeries {
	if r.alias.Load() == nil && !r.use() { // the request path: neither dropped nor aliased
		return r.series.Load()
	}
	_, s := follow(r, func(h *Route) *kept[Route, routeSeries] { return &h.kept },
		func(h *Route) *Route { return h.m.routes[h.dir].add(h.m, h.key, h) }, (*Route).newSeries)
	return s
}

func (r *Route) drop() bool {
	s := r.series.Load()
	r.m.requests.DeleteLabelValues(r.values...)
	s.mu.RLock()
	defer s.mu.RUnlock()
	for k := range s.responses {
		code, class := k.labels()
		r.m.responses.DeleteLabelValues(append(append([]string{}, r.values...), code, k.grpc, class)...)
		r.m.latency.DeleteLabelValues(append(append([]string{}, r.values...), code)...)
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
		resp = r.newResponse(s, k)
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

func (r *Route) newResponse(s *routeSeries, k respKey) *response {
	code, class := k.labels()
	s.mu.Lock()
	defer s.mu.Unlock()
	if resp := s.responses[k]; resp != nil {
		return resp
	}
	resp := &response{
		total:   r.m.responses.WithLabelValues(append(append([]string{}, r.values...), code, k.grpc, class)...),
		latency: r.m.latency.WithLabelValues(append(append([]string{}, r.values...), code)...),
	}
	s.responses[k] = resp
	return resp
}

// TCP is the handle of one kind of connection's series (one Labels). Safe for concurrent
// use.
type TCP struct {
	kept[TCP, tcpSeries]
	m      *Metrics
	values []string
	open   atomic.Int64 // connections open through the handle: while any is, it is not idle
}

type tcpSeries struct {
	open                  prometheus.Counter
	openConns             prometheus.Gauge
	read, written         prometheus.Counter
	closedOK, closedError prometheus.Counter
}

// TCP returns the handle of the connections l, creating their series on first use. Its
// labels are bounded as Route's are.
func (m *Metrics) TCP(l Labels) *TCP {
	d := direction(l.Direction)
	return m.conns[d].get(m, l, func(l Labels) *TCP {
		t := &TCP{m: m, values: l.values()}
		return t.init(t, d, t.newSeries())
	})
}

func (t *TCP) newSeries() *tcpSeries {
	v, m := t.values, t.m
	return &tcpSeries{
		open:        m.tcpOpen.WithLabelValues(v...),
		openConns:   m.tcpOpenConns.WithLabelValues(v...),
		read:        m.tcpRead.WithLabelValues(v...),
		written:     m.tcpWrite.WithLabelValues(v...),
		closedOK:    m.tcpClose.WithLabelValues(append(append([]string{}, v...), "success")...),
		closedError: m.tcpClose.WithLabelValues(append(append([]string{}, v...), "failure")...),
	}
}

// current returns the handle that counts for t (t, or its alias) and its series, made again
// if they were dropped. A handle with a connection open is never dropped, so the handle a
// connection's Open counted on is the one its Close finds.
func (t *TCP) current() (*TCP, *tcpSeries) {
	if t.alias.Load() == nil && !t.use() {
		return t, t.series.Load()
	}
	return follow(t, func(h *TCP) *kept[TCP, tcpSeries] { return &h.kept },
		func(h *TCP) *TCP { return h.m.conns[h.dir].add(h.m, h.key, h) }, (*TCP).newSeries)
}

// target is the handle t stands for now: t, or the end of its aliases.
func (t *TCP) target() *TCP {
	for {
		a := t.alias.Load()
		if a == nil {
			return t
		}
		t = a
	}
}

func (t *TCP) drop() bool {
	if t.open.Load() > 0 {
		return false
	}
	v, m := t.values, t.m
	for _, vec := range []*prometheus.CounterVec{m.tcpOpen, m.tcpRead, m.tcpWrite} {
		vec.DeleteLabelValues(v...)
	}
	m.tcpOpenConns.DeleteLabelValues(v...)
	for _, class := range []string{"success", "failure"} {
		m.tcpClose.DeleteLabelValues(append(append([]string{}, v...), class)...)
	}
	return true
}

// Open counts a connection opened.
func (t *TCP) Open() {
	for {
		// The connection is counted open on its handle before the handle is used, so that
		// no sweep drops it from then on (drop sees it, or the use is seen).
		h := t.target()
		h.open.Add(1)
		got, s := h.current()
		if got == h {
			s.open.Inc()
			s.openConns.Inc()
			return
		}
		h.open.Add(-1) // h became an alias meanwhile: count on its target
	}
}

// Read and Wrote count bytes read from and written to the peer; call them as data flows
// (per copy chunk) so that long connections show their traffic.
func (t *TCP) Read(n int64) {
	_, s := t.current()
	s.read.Add(float64(n))
}

func (t *TCP) Wrote(n int64) {
	_, s := t.current()
	s.written.Add(float64(n))
}

// Close counts a connection closed, failed when it ended with an error.
func (t *TCP) Close(failed bool) {
	h, s := t.current()
	s.openConns.Dec()
	if failed {
		s.closedError.Inc()
	} else {
		s.closedOK.Inc()
	}
	h.open.Add(-1)
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
