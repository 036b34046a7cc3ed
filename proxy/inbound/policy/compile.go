package policy

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"regexp"
	"strings"

	grpcroute "github.com/linkerd/linkerd2-proxy-api/go/grpc_route"
	httproute "github.com/linkerd/linkerd2-proxy-api/go/http_route"
	httptypes "github.com/linkerd/linkerd2-proxy-api/go/http_types"
	"github.com/linkerd/linkerd2-proxy-api/go/inbound"
	"github.com/linkerd/linkerd2-proxy-api/go/meta"
	pnet "github.com/linkerd/linkerd2-proxy-api/go/net"
)

// localhost is the authorization every policy from the service carries last, as in
// linkerd2-proxy: the pod's own traffic to itself is always allowed.
var localhost = &Authz{
	Name: "localhost", Kind: "default",
	Networks: []Network{
		{Net: netip.MustParsePrefix("127.0.0.1/32")},
		{Net: netip.MustParsePrefix("::1/128")},
	},
	Authn: Authn{Kind: Unauthenticated},
}

// filterError is the RoutePolicy.Error of a rule with filters.
const filterError = "route filters are not supported by this proxy"

// Compile checks a policy from the policy service and builds its evaluable form, as
// linkerd2-proxy converts it: a protocol is required (Detect with a timeout), every
// authorization needs networks and an authentication, routes need metadata, and the
// server's labels must name it. The error says what is wrong; the caller keeps its last
// good policy.
func Compile(pb *inbound.Server) (*Server, error) {
	if pb == nil || pb.GetProtocol().GetKind() == nil {
		return nil, errors.New("policy: missing proxy protocol")
	}
	s := &Server{Kind: pb.GetLabels()["kind"], Name: pb.GetLabels()["name"]}
	if s.Name == "" {
		return nil, errors.New("policy: server labels lack a name")
	}
	if s.Kind == "" {
		s.Kind = "server"
	}
	var err error
	if s.Authorizations, err = compileAuthzs(pb.GetAuthorizations(), "serverauthorization"); err != nil {
		return nil, fmt.Errorf("policy %s: %w", s.Name, err)
	}
	s.Authorizations = append(s.Authorizations, localhost)
	var httpRoutes []*inbound.HttpRoute
	switch k := pb.GetProtocol().GetKind().(type) {
	case *inbound.ProxyProtocol_Detect_:
		s.Protocol = Detect
		d := k.Detect.GetTimeout()
		if d == nil {
			return nil, fmt.Errorf("policy %s: missing protocol detection timeout", s.Name)
		}
		if err := d.CheckValid(); err != nil || d.AsDuration() < 0 {
			return nil, fmt.Errorf("policy %s: invalid protocol detection timeout %v", s.Name, d)
		}
		s.DetectTimeout = d.AsDuration()
		httpRoutes = k.Detect.GetHttpRoutes()
	case *inbound.ProxyProtocol_Http1_:
		s.Protocol, httpRoutes = HTTP1, k.Http1.GetRoutes()
	case *inbound.ProxyProtocol_Http2_:
		s.Protocol, httpRoutes = HTTP2, k.Http2.GetRoutes()
	case *inbound.ProxyProtocol_Grpc_:
		s.Protocol = GRPC
		if s.GRPCRoutes, err = compileGRPCRoutes(k.Grpc.GetRoutes(), s.Authorizations); err != nil {
			return nil, fmt.Errorf("policy %s: %w", s.Name, err)
		}
	case *inbound.ProxyProtocol_Opaque_:
		s.Protocol = Opaque
	case *inbound.ProxyProtocol_Tls_:
		s.Protocol = TLS
	default:
		return nil, fmt.Errorf("policy %s: unknown proxy protocol %T", s.Name, k)
	}
	if s.HTTPRoutes, err = compileHTTPRoutes(httpRoutes, s.Authorizations); err != nil {
		return nil, fmt.Errorf("policy %s: %w", s.Name, err)
	}
	return s, nil
}

// defaultHTTPRoute matches every request with the server's authorizations.
func defaultHTTPRoute(authzs []*Authz) *HTTPRoute {
	return &HTTPRoute{Rules: []HTTPRule{{Policy: &RoutePolicy{Name: "default", Authorizations: authzs}}}}
}

func compileHTTPRoutes(pbs []*inbound.HttpRoute, server []*Authz) ([]*HTTPRoute, error) {
	if len(pbs) == 0 {
		return []*HTTPRoute{defaultHTTPRoute(server)}, nil
	}
	out := make([]*HTTPRoute, 0, len(pbs))
	for i, pb := range pbs {
		name, err := metaName(pb.GetMetadata())
		if err != nil {
			return nil, fmt.Errorf("HTTP route %d: %w", i, err)
		}
		rt := &HTTPRoute{}
		if rt.Hosts, err = compileHosts(pb.GetHosts()); err != nil {
			return nil, fmt.Errorf("HTTP route %s: %w", name, err)
		}
		authzs, err := routeAuthzs(pb.GetAuthorizations(), server)
		if err != nil {
			return nil, fmt.Errorf("HTTP route %s: %w", name, err)
		}
		for _, rpb := range pb.GetRules() {
			rule := HTTPRule{Policy: &RoutePolicy{Name: name, Authorizations: authzs}}
			if len(rpb.GetFilters()) > 0 {
				rule.Policy.Error = filterError
			}
			for _, m := range rpb.GetMatches() {
				hm, err := compileHTTPMatch(m)
				if err != nil {
					return nil, fmt.Errorf("HTTP route %s: %w", name, err)
				}
				rule.Matches = append(rule.Matches, hm)
			}
			rt.Rules = append(rt.Rules, rule)
		}
		if len(rt.Rules) == 0 {
			continue // a route without rules matches nothing
		}
		out = append(out, rt)
	}
	return out, nil
}

func compileGRPCRoutes(pbs []*inbound.GrpcRoute, server []*Authz) ([]*GRPCRoute, error) {
	if len(pbs) == 0 {
		return []*GRPCRoute{{Rules: []GRPCRule{{Policy: &RoutePolicy{Name: "default", Authorizations: server}}}}}, nil
	}
	out := make([]*GRPCRoute, 0, len(pbs))
	for i, pb := range pbs {
		name, err := metaName(pb.GetMetadata())
		if err != nil {
			return nil, fmt.Errorf("gRPC route %d: %w", i, err)
		}
		rt := &GRPCRoute{}
		if rt.Hosts, err = compileHosts(pb.GetHosts()); err != nil {
			return nil, fmt.Errorf("gRPC route %s: %w", name, err)
		}
		authzs, err := routeAuthzs(pb.GetAuthorizations(), server)
		if err != nil {
			return nil, fmt.Errorf("gRPC route %s: %w", name, err)
		}
		for _, rpb := range pb.GetRules() {
			rule := GRPCRule{Policy: &RoutePolicy{Name: name, Authorizations: authzs}}
			if len(rpb.GetFilters()) > 0 {
				rule.Policy.Error = filterError
			}
			for _, m := range rpb.GetMatches() {
				gm, err := compileGRPCMatch(m)
				if err != nil {
					return nil, fmt.Errorf("gRPC route %s: %w", name, err)
				}
				rule.Matches = append(rule.Matches, gm)
			}
			rt.Rules = append(rt.Rules, rule)
		}
		if len(rt.Rules) > 0 {
			out = append(out, rt)
		}
	}
	return out, nil
}

// routeAuthzs are a route's own authorizations followed by the server's.
func routeAuthzs(pbs []*inbound.Authz, server []*Authz) ([]*Authz, error) {
	own, err := compileAuthzs(pbs, "serverauthorization")
	if err != nil {
		return nil, err
	}
	return append(own, server...), nil
}

func compileHTTPMatch(pb *httproute.HttpRouteMatch) (HTTPMatch, error) {
	var m HTTPMatch
	if p := pb.GetPath(); p != nil {
		pm := &PathMatch{}
		switch k := p.GetKind().(type) {
		case *httproute.PathMatch_Exact:
			pm.Kind, pm.Value = PathExact, k.Exact
		case *httproute.PathMatch_Prefix:
			pm.Kind, pm.Value = PathPrefix, k.Prefix
		case *httproute.PathMatch_Regex:
			re, err := regexp.Compile(k.Regex)
			if err != nil {
				return m, fmt.Errorf("path regex %q: %w", short(k.Regex), err)
			}
			pm.Kind, pm.Value, pm.Regex = PathRegex, k.Regex, re
		default:
			return m, errors.New("path match without a kind")
		}
		m.Path = pm
	}
	var err error
	if m.Headers, err = compileHeaders(pb.GetHeaders()); err != nil {
		return m, err
	}
	for _, q := range pb.GetQueryParams() {
		qm := QueryMatch{Name: q.GetName()}
		switch v := q.GetValue().(type) {
		case *httproute.QueryParamMatch_Exact:
			qm.Exact = v.Exact
		case *httproute.QueryParamMatch_Regex:
			if qm.Regex, err = regexp.Compile(v.Regex); err != nil {
				return m, fmt.Errorf("query parameter %q regex: %w", short(qm.Name), err)
			}
		default:
			return m, fmt.Errorf("query parameter %q match without a value", short(qm.Name))
		}
		m.Query = append(m.Query, qm)
	}
	if pb.GetMethod() != nil {
		if m.Method, err = method(pb.GetMethod()); err != nil {
			return m, err
		}
	}
	return m, nil
}

func compileGRPCMatch(pb *grpcroute.GrpcRouteMatch) (GRPCMatch, error) {
	m := GRPCMatch{Service: pb.GetRpc().GetService(), Method: pb.GetRpc().GetMethod()}
	var err error
	m.Headers, err = compileHeaders(pb.GetHeaders())
	return m, err
}

func compileHeaders(pbs []*httproute.HeaderMatch) ([]HeaderMatch, error) {
	var out []HeaderMatch
	for _, h := range pbs {
		if !validHeaderName(h.GetName()) {
			return nil, fmt.Errorf("invalid header name %q", short(h.GetName()))
		}
		hm := HeaderMatch{Name: http.CanonicalHeaderKey(h.GetName())}
		switch v := h.GetValue().(type) {
		case *httproute.HeaderMatch_Exact:
			hm.Exact = string(v.Exact)
		case *httproute.HeaderMatch_Regex:
			re, err := regexp.Compile(v.Regex)
			if err != nil {
				return nil, fmt.Errorf("header %q regex: %w", short(hm.Name), err)
			}
			hm.Regex = re
		default:
			return nil, fmt.Errorf("header %q match without a value", short(hm.Name))
		}
		out = append(out, hm)
	}
	return out, nil
}

func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte("\"(),/:;<=>?@[\\]{}", c) >= 0 {
			return false
		}
	}
	return true
}

var methods = map[httptypes.HttpMethod_Registered]string{
	httptypes.HttpMethod_GET: http.MethodGet, httptypes.HttpMethod_POST: http.MethodPost,
	httptypes.HttpMethod_PUT: http.MethodPut, httptypes.HttpMethod_DELETE: http.MethodDelete,
	httptypes.HttpMethod_PATCH: http.MethodPatch, httptypes.HttpMethod_OPTIONS: http.MethodOptions,
	httptypes.HttpMethod_CONNECT: http.MethodConnect, httptypes.HttpMethod_HEAD: http.MethodHead,
	httptypes.HttpMethod_TRACE: http.MethodTrace,
}

func method(pb *httptypes.HttpMethod) (string, error) {
	switch t := pb.GetType().(type) {
	case *httptypes.HttpMethod_Registered_:
		if m, ok := methods[t.Registered]; ok {
			return m, nil
		}
		return "", fmt.Errorf("unknown registered method %d", t.Registered)
	case *httptypes.HttpMethod_Unregistered:
		if !validHeaderName(t.Unregistered) {
			return "", fmt.Errorf("invalid method %q", short(t.Unregistered))
		}
		return t.Unregistered, nil
	}
	return "", errors.New("method match without a method")
}

func compileHosts(pbs []*httproute.HostMatch) ([]HostMatch, error) {
	var out []HostMatch
	for _, h := range pbs {
		switch m := h.GetMatch().(type) {
		case *httproute.HostMatch_Exact:
			if m.Exact == "" {
				return nil, errors.New("empty exact host match")
			}
			out = append(out, HostMatch{Exact: strings.ToLower(m.Exact)})
		case *httproute.HostMatch_Suffix_:
			labels := m.Suffix.GetReverseLabels()
			var b strings.Builder
			for i := len(labels) - 1; i >= 0; i-- {
				b.WriteByte('.')
				b.WriteString(strings.ToLower(labels[i]))
			}
			if len(labels) == 0 {
				return nil, errors.New("empty host suffix match")
			}
			out = append(out, HostMatch{Suffix: b.String()})
		default:
			return nil, errors.New("host match without a match")
		}
	}
	return out, nil
}

// compileAuthzs converts authorizations; fallbackKind names those that carry labels only.
func compileAuthzs(pbs []*inbound.Authz, fallbackKind string) ([]*Authz, error) {
	out := make([]*Authz, 0, len(pbs)+1)
	for i, pb := range pbs {
		a, err := compileAuthz(pb, fallbackKind)
		if err != nil {
			return nil, fmt.Errorf("authorization %d: %w", i, err)
		}
		out = append(out, a)
	}
	return out, nil
}

func compileAuthz(pb *inbound.Authz, fallbackKind string) (*Authz, error) {
	a := &Authz{}
	if md := pb.GetMetadata(); md != nil {
		var err error
		if a.Name, err = metaName(md); err != nil {
			return nil, err
		}
		a.Kind = "default"
		if r := md.GetResource(); r != nil {
			a.Kind = r.GetKind()
		}
	} else {
		a.Name, a.Kind = pb.GetLabels()["name"], pb.GetLabels()["kind"]
		if a.Name == "" {
			return nil, errors.New("no metadata and no name label")
		}
		if a.Kind == "" {
			a.Kind = fallbackKind
		}
	}
	if len(pb.GetNetworks()) == 0 {
		return nil, fmt.Errorf("%s: missing networks", a.Name)
	}
	for _, n := range pb.GetNetworks() {
		net, err := ipPrefix(n.GetNet())
		if err != nil {
			return nil, fmt.Errorf("%s: %w", a.Name, err)
		}
		nw := Network{Net: net}
		for _, e := range n.GetExcept() {
			ex, err := ipPrefix(e)
			if err != nil {
				return nil, fmt.Errorf("%s: except: %w", a.Name, err)
			}
			nw.Except = append(nw.Except, ex)
		}
		a.Networks = append(a.Networks, nw)
	}
	var err error
	if a.Authn, err = compileAuthn(pb.GetAuthentication()); err != nil {
		return nil, fmt.Errorf("%s: %w", a.Name, err)
	}
	return a, nil
}

func compileAuthn(pb *inbound.Authn) (Authn, error) {
	switch p := pb.GetPermit().(type) {
	case *inbound.Authn_Unauthenticated:
		return Authn{Kind: Unauthenticated}, nil
	case *inbound.Authn_MeshTLS:
		switch c := p.MeshTLS.GetClients().(type) {
		case *inbound.Authn_PermitMeshTLS_Unauthenticated:
			return Authn{Kind: TLSUnauthenticated}, nil
		case *inbound.Authn_PermitMeshTLS_Identities:
			an := Authn{Kind: TLSAuthenticated, Identities: map[string]struct{}{}}
			for _, id := range c.Identities.GetIdentities() {
				an.Identities[id.GetName()] = struct{}{}
			}
			for _, s := range c.Identities.GetSuffixes() {
				an.Suffixes = append(an.Suffixes, suffix(s.GetParts()))
			}
			return an, nil
		}
	}
	return Authn{}, errors.New("missing authentication")
}

// suffix is Linkerd's identity suffix: "" for no parts (every identity), else ".a.b".
func suffix(parts []string) string {
	if len(parts) == 0 {
		return ""
	}
	return "." + strings.Join(parts, ".")
}

func metaName(md *meta.Metadata) (string, error) {
	switch k := md.GetKind().(type) {
	case *meta.Metadata_Default:
		if k.Default != "" {
			return k.Default, nil
		}
	case *meta.Metadata_Resource:
		if k.Resource.GetName() != "" {
			return k.Resource.GetName(), nil
		}
	}
	return "", errors.New("missing metadata")
}

// prefix converts an IPNetwork (IPv4 as a big-endian uint32, IPv6 as two big-endian
// uint64 halves).
func ipPrefix(n *pnet.IPNetwork) (netip.Prefix, error) {
	var addr netip.Addr
	switch ip := n.GetIp().GetIp().(type) {
	case *pnet.IPAddress_Ipv4:
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], ip.Ipv4)
		addr = netip.AddrFrom4(b)
	case *pnet.IPAddress_Ipv6:
		var b [16]byte
		binary.BigEndian.PutUint64(b[:8], ip.Ipv6.GetFirst())
		binary.BigEndian.PutUint64(b[8:], ip.Ipv6.GetLast())
		addr = netip.AddrFrom16(b)
	default:
		return netip.Prefix{}, errors.New("network without an address")
	}
	bits := n.GetPrefixLen()
	if bits > uint32(addr.BitLen()) {
		return netip.Prefix{}, fmt.Errorf("prefix length %d too long for %v", bits, addr)
	}
	return netip.PrefixFrom(addr, int(bits)).Masked(), nil
}

func short(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}
