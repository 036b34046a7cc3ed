package compute

import (
	"encoding/binary"
	"net/netip"
	"time"

	grpcroute "github.com/linkerd/linkerd2-proxy-api/go/grpc_route"
	httproute "github.com/linkerd/linkerd2-proxy-api/go/http_route"
	httptypes "github.com/linkerd/linkerd2-proxy-api/go/http_types"
	"github.com/linkerd/linkerd2-proxy-api/go/inbound"
	"github.com/linkerd/linkerd2-proxy-api/go/meta"
	"github.com/linkerd/linkerd2-proxy-api/go/net"
	"google.golang.org/protobuf/types/known/durationpb"
)

// The wire shape, as Linkerd's policy controller builds it (policy-controller/grpc/src/inbound.rs).

const policyGroup = "policy.linkerd.io"

type serverRef struct{ Default, Server string }

type authzRefKind int

const (
	authzDefault authzRefKind = iota
	authzServerAuthorization
	authzAuthorizationPolicy
)

type authzRef struct {
	Kind authzRefKind
	Name string
}

type permitKind int

const (
	permitUnauthenticated    permitKind = iota // plaintext or TLS, any client
	permitTLSUnauthenticated                   // mesh TLS, no client identity needed
	permitIdentities                           // mesh TLS from these identities / suffixes
)

type authn struct {
	Kind       permitKind
	Identities []string
	Suffixes   [][]string
}

type authorization struct {
	Ref      authzRef
	Networks []NetworkMatch
	Authn    authn
}

type inboundServer struct {
	Ref            serverRef
	Protocol       Protocol
	DetectTimeout  time.Duration
	Authorizations []authorization
	ProbePaths     []string
	ProbeNetworks  []netip.Prefix
}

func (s *inboundServer) proto(cfg *Config) *inbound.Server {
	out := &inbound.Server{Protocol: &inbound.ProxyProtocol{}}
	switch s.Protocol {
	case ProtocolHTTP1:
		out.Protocol.Kind = &inbound.ProxyProtocol_Http1_{Http1: &inbound.ProxyProtocol_Http1{Routes: s.httpRoutes()}}
	case ProtocolHTTP2:
		out.Protocol.Kind = &inbound.ProxyProtocol_Http2_{Http2: &inbound.ProxyProtocol_Http2{Routes: s.httpRoutes()}}
	case ProtocolGRPC:
		out.Protocol.Kind = &inbound.ProxyProtocol_Grpc_{Grpc: &inbound.ProxyProtocol_Grpc{Routes: []*inbound.GrpcRoute{defaultGRPCRoute()}}}
	case ProtocolOpaque:
		out.Protocol.Kind = &inbound.ProxyProtocol_Opaque_{Opaque: &inbound.ProxyProtocol_Opaque{}}
	case ProtocolTLS:
		out.Protocol.Kind = &inbound.ProxyProtocol_Tls_{Tls: &inbound.ProxyProtocol_Tls{}}
	default:
		out.Protocol.Kind = &inbound.ProxyProtocol_Detect_{Detect: &inbound.ProxyProtocol_Detect{
			Timeout:    durationpb.New(s.DetectTimeout),
			HttpRoutes: s.httpRoutes(),
		}}
	}
	for i := range s.Authorizations {
		out.Authorizations = append(out.Authorizations, s.Authorizations[i].proto(cfg))
	}
	if s.Ref.Server != "" {
		out.Labels = map[string]string{"group": policyGroup, "kind": "server", "name": s.Ref.Server}
	} else {
		out.Labels = map[string]string{"group": "", "kind": "default", "name": s.Ref.Default}
	}
	return out
}

// httpRoutes are Linkerd's default routes: "default" (every path; the server's
// authorizations apply) and, when the port has HTTP probes, "probe" (GET on each probe path,
// authorised unauthenticated from the probe networks).
func (s *inboundServer) httpRoutes() []*inbound.HttpRoute {
	routes := []*inbound.HttpRoute{{
		Metadata: defaultMeta("default"),
		Rules: []*inbound.HttpRoute_Rule{{
			Matches: []*httproute.HttpRouteMatch{{
				Path: &httproute.PathMatch{Kind: &httproute.PathMatch_Prefix{Prefix: "/"}},
			}},
		}},
	}}
	if len(s.ProbePaths) == 0 || len(s.ProbeNetworks) == 0 {
		return routes
	}
	probe := &inbound.HttpRoute{Metadata: defaultMeta("probe"), Rules: []*inbound.HttpRoute_Rule{{}}}
	for _, p := range s.ProbePaths {
		probe.Rules[0].Matches = append(probe.Rules[0].Matches, &httproute.HttpRouteMatch{
			Path:   &httproute.PathMatch{Kind: &httproute.PathMatch_Exact{Exact: p}},
			Method: &httptypes.HttpMethod{Type: &httptypes.HttpMethod_Registered_{Registered: httptypes.HttpMethod_GET}},
		})
	}
	probeAuthz := authorization{
		Ref:      authzRef{Kind: authzDefault, Name: "probe"},
		Networks: prefixNetworks(s.ProbeNetworks),
		Authn:    authn{Kind: permitUnauthenticated},
	}
	probe.Authorizations = []*inbound.Authz{probeAuthz.proto(nil)}
	return append(routes, probe)
}

func defaultGRPCRoute() *inbound.GrpcRoute {
	return &inbound.GrpcRoute{
		Metadata: defaultMeta("default"),
		Rules: []*inbound.GrpcRoute_Rule{{
			Matches: []*grpcroute.GrpcRouteMatch{{Rpc: &grpcroute.GrpcRpcMatch{}}},
		}},
	}
}

func defaultMeta(name string) *meta.Metadata {
	return &meta.Metadata{Kind: &meta.Metadata_Default{Default: name}}
}

func (a *authorization) proto(cfg *Config) *inbound.Authz {
	out := &inbound.Authz{}
	switch a.Ref.Kind {
	case authzDefault:
		out.Metadata = defaultMeta(a.Ref.Name)
		out.Labels = map[string]string{"group": "", "kind": "default", "name": a.Ref.Name}
	default:
		kind := "authorizationpolicy"
		if a.Ref.Kind == authzServerAuthorization {
			kind = "serverauthorization"
		}
		out.Metadata = &meta.Metadata{Kind: &meta.Metadata_Resource{Resource: &meta.Resource{
			Group: policyGroup, Kind: kind, Name: a.Ref.Name,
		}}}
		out.Labels = map[string]string{"group": policyGroup, "kind": kind, "name": a.Ref.Name}
	}
	nets := a.Networks
	if len(nets) == 0 && cfg != nil {
		nets = prefixNetworks(cfg.ClusterNetworks)
	}
	for _, n := range nets {
		pn := &inbound.Network{Net: ipNetwork(n.Net)}
		for _, e := range n.Except {
			pn.Except = append(pn.Except, ipNetwork(e))
		}
		out.Networks = append(out.Networks, pn)
	}
	switch a.Authn.Kind {
	case permitUnauthenticated:
		out.Authentication = &inbound.Authn{Permit: &inbound.Authn_Unauthenticated{Unauthenticated: &inbound.Authn_PermitUnauthenticated{}}}
	case permitTLSUnauthenticated:
		out.Authentication = &inbound.Authn{Permit: &inbound.Authn_MeshTLS{MeshTLS: &inbound.Authn_PermitMeshTLS{
			Clients: &inbound.Authn_PermitMeshTLS_Unauthenticated{Unauthenticated: &inbound.Authn_PermitUnauthenticated{}},
		}}}
	default:
		ids := &inbound.Authn_PermitMeshTLS_PermitClientIdentities{}
		for _, id := range a.Authn.Identities {
			ids.Identities = append(ids.Identities, &inbound.Identity{Name: id})
		}
		for _, s := range a.Authn.Suffixes {
			ids.Suffixes = append(ids.Suffixes, &inbound.IdentitySuffix{Parts: s})
		}
		out.Authentication = &inbound.Authn{Permit: &inbound.Authn_MeshTLS{MeshTLS: &inbound.Authn_PermitMeshTLS{
			Clients: &inbound.Authn_PermitMeshTLS_Identities{Identities: ids},
		}}}
	}
	return out
}

// ipNetwork converts a prefix to the proxy API's network (IPv4 as a big-endian uint32, IPv6
// as two big-endian uint64 halves).
func ipNetwork(p netip.Prefix) *net.IPNetwork {
	addr := p.Addr()
	ip := &net.IPAddress{}
	if addr.Is4() {
		b := addr.As4()
		ip.Ip = &net.IPAddress_Ipv4{Ipv4: binary.BigEndian.Uint32(b[:])}
	} else {
		b := addr.As16()
		ip.Ip = &net.IPAddress_Ipv6{Ipv6: &net.IPv6{
			First: binary.BigEndian.Uint64(b[:8]),
			Last:  binary.BigEndian.Uint64(b[8:]),
		}}
	}
	return &net.IPNetwork{Ip: ip, PrefixLen: uint32(p.Bits())}
}
