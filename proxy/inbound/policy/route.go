package policy

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
)

// HTTPRoute is a compiled inbound.HttpRoute.
type HTTPRoute struct {
	Hosts []HostMatch // empty: every host
	Rules []HTTPRule  // never empty
}

// HTTPRule is one rule of a route: any of Matches (none: every request) selects Policy.
type HTTPRule struct {
	Matches []HTTPMatch
	Policy  *RoutePolicy
}

// HTTPMatch matches a request by all of its parts that are set.
type HTTPMatch struct {
	Path    *PathMatch // nil: any path
	Headers []HeaderMatch
	Query   []QueryMatch
	Method  string // "": any method
}

// PathMatchKind is how a PathMatch compares.
type PathMatchKind uint8

// The kinds of path match.
const (
	PathExact PathMatchKind = iota
	PathPrefix
	PathRegex
)

// PathMatch matches the request path.
type PathMatch struct {
	Kind  PathMatchKind
	Value string         // the path or prefix
	Regex *regexp.Regexp // PathRegex: must match the whole path
}

// HeaderMatch matches when any value of the header Name (canonical form) equals Exact or
// matches Regex as a whole.
type HeaderMatch struct {
	Name  string
	Exact string
	Regex *regexp.Regexp
}

// QueryMatch matches when any value of the query parameter Name equals Exact or matches
// Regex as a whole.
type QueryMatch struct {
	Name  string
	Exact string
	Regex *regexp.Regexp
}

// HostMatch matches the request's host: equal to Exact, or ending in Suffix (".a.b",
// with at least one label before it). Both are lowercase and compared case-insensitively.
type HostMatch struct {
	Exact  string
	Suffix string
}

// GRPCRoute is a compiled inbound.GrpcRoute.
type GRPCRoute struct {
	Hosts []HostMatch
	Rules []GRPCRule
}

// GRPCRule is one rule of a gRPC route.
type GRPCRule struct {
	Matches []GRPCMatch
	Policy  *RoutePolicy
}

// GRPCMatch matches POST /Service/Method; empty Service or Method match any.
type GRPCMatch struct {
	Service, Method string
	Headers         []HeaderMatch
}

// score orders matches: the greater is more specific. Fields compare in order.
type score [6]int

func (a score) less(b score) bool {
	for i := range a {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return false
}

// Request is what route matching reads of a request. Its strings may alias a buffer the
// caller reuses once Match returns: Match keeps none of them.
type Request struct {
	Method   string
	Host     string // the authority: host, host:port or [v6]:port
	Path     string // unescaped, as url.URL.Path
	RawQuery string // without the '?'
	Header   Headers
}

// Headers are a request's header fields. Values returns the values of the field called name
// (in canonical form), nil when it is absent; http.Header implements it. Route matching
// calls it only for routes that match on headers.
type Headers interface {
	Values(name string) []string
}

// Route returns the policy of the rule that best matches r, or nil when no route matches
// (the proxy answers 404). Routes are gRPC routes for protocol GRPC, HTTP routes otherwise.
func (s *Server) Route(r *http.Request) *RoutePolicy {
	return s.Match(&Request{Method: r.Method, Host: r.Host, Path: r.URL.Path, RawQuery: r.URL.RawQuery, Header: r.Header})
}

// Match is Route for a request given by its parts.
func (s *Server) Match(r *Request) *RoutePolicy {
	var (
		best  *RoutePolicy
		bestS score
	)
	q := lazyQuery{raw: r.RawQuery}
	if s.Protocol == GRPC {
		for _, rt := range s.GRPCRoutes {
			if p, sc, ok := rt.match(r); ok && (best == nil || bestS.less(sc)) {
				best, bestS = p, sc
			}
		}
		return best
	}
	for _, rt := range s.HTTPRoutes {
		if p, sc, ok := rt.match(r, &q); ok && (best == nil || bestS.less(sc)) {
			best, bestS = p, sc
		}
	}
	return best
}

func (rt *HTTPRoute) match(r *Request, q *lazyQuery) (*RoutePolicy, score, bool) {
	var sc score
	if len(rt.Hosts) > 0 {
		kind, n, ok := matchHosts(rt.Hosts, r.Host)
		if !ok {
			return nil, sc, false
		}
		sc[0], sc[1] = kind, n
	}
	var best *RoutePolicy
	var bestS score
	for i := range rt.Rules {
		rule := &rt.Rules[i]
		rs, ok := score{}, false
		if len(rule.Matches) == 0 {
			rs, ok = score{2: 1}, true // the implicit match: prefix "/"
		}
		for j := range rule.Matches {
			if ms, mok := rule.Matches[j].match(r, q); mok && (!ok || rs.less(ms)) {
				rs, ok = ms, true
			}
		}
		if ok && (best == nil || bestS.less(rs)) {
			best, bestS = rule.Policy, rs
		}
	}
	if best == nil {
		return nil, sc, false
	}
	sc[2], sc[3], sc[4], sc[5] = bestS[2], bestS[3], bestS[4], bestS[5]
	return best, sc, true
}

// match scores m against r: path length, method, headers, query parameters (Linkerd's
// order). A match without a path criterion counts as prefix "/".
func (m *HTTPMatch) match(r *Request, q *lazyQuery) (score, bool) {
	var sc score
	if m.Method != "" {
		if r.Method != m.Method {
			return sc, false
		}
		sc[3] = 1
	}
	sc[2] = 1
	if m.Path != nil {
		n, ok := m.Path.match(r.Path)
		if !ok {
			return sc, false
		}
		sc[2] = n
	}
	for i := range m.Headers {
		if !m.Headers[i].match(r.Header) {
			return sc, false
		}
	}
	sc[4] = len(m.Headers)
	if len(m.Query) > 0 {
		vals := q.values()
		for i := range m.Query {
			if !m.Query[i].match(vals) {
				return sc, false
			}
		}
	}
	sc[5] = len(m.Query)
	return sc, true
}

// match returns the length matched: the path's for exact and regex, the prefix's (without
// a trailing slash) for a prefix, which must end at a segment boundary.
func (p *PathMatch) match(path string) (int, bool) {
	switch p.Kind {
	case PathExact:
		return len(p.Value), path == p.Value
	case PathRegex:
		return len(path), wholeMatch(p.Regex, path)
	}
	if p.Value == "/" {
		return 1, true
	}
	prefix := strings.TrimRight(p.Value, "/")
	rest, ok := strings.CutPrefix(strings.TrimRight(path, "/"), prefix)
	if !ok || (rest != "" && rest[0] != '/') {
		return 0, false
	}
	return len(prefix), true
}

func wholeMatch(re *regexp.Regexp, s string) bool {
	loc := re.FindStringIndex(s)
	return loc != nil && loc[0] == 0 && loc[1] == len(s)
}

func (h *HeaderMatch) match(hdr Headers) bool {
	if hdr == nil {
		return false
	}
	for _, v := range hdr.Values(h.Name) {
		if h.Regex != nil {
			if wholeMatch(h.Regex, v) {
				return true
			}
		} else if v == h.Exact {
			return true
		}
	}
	return false
}

func (m *QueryMatch) match(vals url.Values) bool {
	for _, v := range vals[m.Name] {
		if m.Regex != nil {
			if wholeMatch(m.Regex, v) {
				return true
			}
		} else if v == m.Exact {
			return true
		}
	}
	return false
}

// lazyQuery parses the query string on first use only.
type lazyQuery struct {
	raw    string
	parsed url.Values
}

func (q *lazyQuery) values() url.Values {
	if q.parsed == nil {
		q.parsed, _ = url.ParseQuery(q.raw) // what parses is used, as net/http does
		if q.parsed == nil {
			q.parsed = url.Values{}
		}
	}
	return q.parsed
}

// matchHosts returns the best host match of authority: 2 for exact, 1 for suffix, with the
// length matched.
func matchHosts(hosts []HostMatch, authority string) (kind, n int, ok bool) {
	host := hostOnly(authority)
	for i := range hosts {
		k, l, m := hosts[i].match(host)
		if m && (!ok || k > kind || (k == kind && l > n)) {
			kind, n, ok = k, l, true
		}
	}
	return kind, n, ok
}

func (h *HostMatch) match(host string) (kind, n int, ok bool) {
	if h.Exact != "" {
		if !strings.HasSuffix(h.Exact, ".") {
			host = strings.TrimSuffix(host, ".")
		}
		return 2, len(h.Exact), strings.EqualFold(host, h.Exact)
	}
	if !strings.HasSuffix(h.Suffix, ".") {
		host = strings.TrimSuffix(host, ".")
	}
	if len(host) <= len(h.Suffix) || !strings.EqualFold(host[len(host)-len(h.Suffix):], h.Suffix) {
		return 0, 0, false
	}
	return 1, len(h.Suffix), true
}

// hostOnly strips the port from an authority (host, host:port, [v6]:port).
func hostOnly(authority string) string {
	if strings.HasPrefix(authority, "[") {
		if i := strings.IndexByte(authority, ']'); i > 0 {
			return authority[1:i]
		}
		return authority
	}
	if i := strings.LastIndexByte(authority, ':'); i >= 0 && strings.Count(authority, ":") == 1 {
		return authority[:i]
	}
	return authority
}

func (rt *GRPCRoute) match(r *Request) (*RoutePolicy, score, bool) {
	var sc score
	if r.Method != http.MethodPost {
		return nil, sc, false
	}
	if len(rt.Hosts) > 0 {
		kind, n, ok := matchHosts(rt.Hosts, r.Host)
		if !ok {
			return nil, sc, false
		}
		sc[0], sc[1] = kind, n
	}
	service, method, ok := splitRPC(r.Path)
	if !ok {
		return nil, sc, false
	}
	var best *RoutePolicy
	var bestS score
	for i := range rt.Rules {
		rule := &rt.Rules[i]
		rs, rok := score{}, len(rule.Matches) == 0
		for j := range rule.Matches {
			if ms, mok := rule.Matches[j].match(service, method, r.Header); mok && (!rok || rs.less(ms)) {
				rs, rok = ms, true
			}
		}
		if rok && (best == nil || bestS.less(rs)) {
			best, bestS = rule.Policy, rs
		}
	}
	if best == nil {
		return nil, sc, false
	}
	sc[2], sc[3], sc[4] = bestS[2], bestS[3], bestS[4]
	return best, sc, true
}

// match scores by the lengths of the service and method matched, then headers.
func (m *GRPCMatch) match(service, method string, hdr Headers) (score, bool) {
	var sc score
	if m.Service != "" {
		if m.Service != service {
			return sc, false
		}
		sc[2] = len(service)
	}
	if m.Method != "" {
		if m.Method != method {
			return sc, false
		}
		sc[3] = len(method)
	}
	for i := range m.Headers {
		if !m.Headers[i].match(hdr) {
			return sc, false
		}
	}
	sc[4] = len(m.Headers)
	return sc, true
}

// splitRPC splits a gRPC path /Service/Method.
func splitRPC(path string) (service, method string, ok bool) {
	rest, ok := strings.CutPrefix(path, "/")
	if !ok {
		return "", "", false
	}
	service, rest, ok = strings.Cut(rest, "/")
	if !ok {
		return "", "", false
	}
	method, _, _ = strings.Cut(rest, "/")
	return service, method, true
}
