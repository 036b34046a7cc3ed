package policy

import (
	"net/netip"
	"strings"
	"time"
)

// Protocol is a port's proxy protocol.
type Protocol uint8

// The protocols of inbound.ProxyProtocol.
const (
	Detect Protocol = iota // detect HTTP, else opaque TCP
	HTTP1
	HTTP2
	GRPC
	Opaque
	TLS // TLS the application terminates: proxied as opaque TCP
)

func (p Protocol) String() string {
	switch p {
	case Detect:
		return "detect"
	case HTTP1:
		return "http/1"
	case HTTP2:
		return "http/2"
	case GRPC:
		return "grpc"
	case Opaque:
		return "opaque"
	case TLS:
		return "tls"
	}
	return "unknown"
}

// Server is a port's compiled inbound policy. It is immutable once built: share it by
// pointer and do not modify it.
type Server struct {
	// Name and Kind come from the policy's labels: a Server resource ("server", its name) or
	// a default policy ("default", e.g. "all-unauthenticated").
	Name, Kind string
	Protocol   Protocol
	// DetectTimeout bounds protocol detection (Protocol Detect).
	DetectTimeout time.Duration
	// Authorizations authorize connections (opaque and TLS traffic, and undetected
	// traffic on a Detect port). Every route's authorizations end with these.
	Authorizations []*Authz
	// HTTPRoutes serve HTTP traffic on every protocol but GRPC. A policy sent without
	// routes gets one default route with the server's authorizations.
	HTTPRoutes []*HTTPRoute
	// GRPCRoutes serve protocol GRPC, likewise.
	GRPCRoutes []*GRPCRoute
}

// Authz is one authorization.
type Authz struct {
	// Name and Kind name it in metrics and logs: "default"/"all-unauthenticated",
	// "authorizationpolicy"/"web-from-gateway", "default"/"localhost", ...
	Name, Kind string
	Networks   []Network
	Authn      Authn
}

// Network is a network the client's address must be in, minus exceptions.
type Network struct {
	Net    netip.Prefix
	Except []netip.Prefix
}

// AuthnKind is what an authorization requires of the client.
type AuthnKind uint8

const (
	// Unauthenticated permits any client, plaintext or TLS.
	Unauthenticated AuthnKind = iota
	// TLSUnauthenticated permits any client whose mesh TLS the proxy terminated.
	TLSUnauthenticated
	// TLSAuthenticated permits mesh TLS clients with one of Identities or Suffixes.
	TLSAuthenticated
)

// Authn is an authorization's authentication.
type Authn struct {
	Kind       AuthnKind
	Identities map[string]struct{}
	// Suffixes are ".a.b" for the parts [a b], or "" (every identity).
	Suffixes []string
}

// Client is what authorization knows of the client of a connection.
type Client struct {
	// Addr is the client's address (IPv4-mapped IPv6 addresses are unmapped by Allows).
	Addr netip.Addr
	// TLS reports that the proxy terminated the client's mesh TLS.
	TLS bool
	// Identity is the identity the client's certificate proved ("" for none).
	Identity string
}

// Allows reports whether a permits c.
func (a *Authz) Allows(c Client) bool {
	addr := c.Addr.Unmap()
	in := false
	for i := range a.Networks {
		if a.Networks[i].contains(addr) {
			in = true
			break
		}
	}
	if !in {
		return false
	}
	switch a.Authn.Kind {
	case Unauthenticated:
		return true
	case TLSUnauthenticated:
		return c.TLS
	case TLSAuthenticated:
		if !c.TLS || c.Identity == "" {
			return false
		}
		if _, ok := a.Authn.Identities[c.Identity]; ok {
			return true
		}
		for _, s := range a.Authn.Suffixes {
			if strings.HasSuffix(c.Identity, s) {
				return true
			}
		}
	}
	return false
}

func (n *Network) contains(a netip.Addr) bool {
	if !n.Net.Contains(a) {
		return false
	}
	for _, e := range n.Except {
		if e.Contains(a) {
			return false
		}
	}
	return true
}

// Authorize returns the first of authzs that permits c, or nil.
func Authorize(authzs []*Authz, c Client) *Authz {
	for _, a := range authzs {
		if a.Allows(c) {
			return a
		}
	}
	return nil
}

// AuthorizeTCP authorizes a connection (opaque traffic) by the server's authorizations; nil
// means denied.
func (s *Server) AuthorizeTCP(c Client) *Authz { return Authorize(s.Authorizations, c) }

// RoutePolicy is what a matched route rule applies to a request.
type RoutePolicy struct {
	// Name is the route's name ("default", "probe", or a route resource's).
	Name string
	// Authorizations are the route's own, then the server's.
	Authorizations []*Authz
	// Error, when set, says why the rule cannot serve requests (a filter the proxy does not
	// apply): requests matching it get 500.
	Error string
}

// Authorize returns the first authorization of the route that permits c, or nil.
func (p *RoutePolicy) Authorize(c Client) *Authz { return Authorize(p.Authorizations, c) }
