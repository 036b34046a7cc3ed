package shard

import (
	"net"
	"strconv"
	"strings"
	"time"

	pb "github.com/linkerd/linkerd2-proxy-api/go/destination"
	httppb "github.com/linkerd/linkerd2-proxy-api/go/http_types"
	"github.com/linkerd/linkerd2-proxy-api/go/meta"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/meridian-mesh/meridian/translator"
)

// withServiceProfile returns p, the profile of port of a Service, with what the
// ServiceProfile sp gives it, as Linkerd's profile translator does: its routes (each
// condition with more than one field set becomes an "all" of them), the profile's retry
// budget (the default without one), its dstOverrides (an authority without a port gets
// port), and a reference to it. The opaque protocol stays the Service's (Linkerd ignores a
// profile's opaquePorts). sp must be valid (its Problem empty).
func withServiceProfile(p *pb.DestinationProfile, sp *translator.ServiceProfile, port uint32) *pb.DestinationProfile {
	p.ProfileRef = &meta.Metadata{Kind: &meta.Metadata_Resource{Resource: &meta.Resource{
		Group: translator.ServiceProfileGroup, Kind: "ServiceProfile", Name: sp.Name, Namespace: sp.Namespace,
	}}}
	p.Routes = make([]*pb.Route, 0, len(sp.Spec.Routes))
	for _, r := range sp.Spec.Routes {
		p.Routes = append(p.Routes, route(r))
	}
	if rb := sp.Spec.RetryBudget; rb != nil {
		ttl, _ := time.ParseDuration(rb.TTL) // checked by CheckServiceProfile
		p.RetryBudget = &pb.RetryBudget{RetryRatio: rb.RetryRatio, MinRetriesPerSecond: rb.MinRetriesPerSecond, Ttl: duration(ttl)}
	}
	p.DstOverrides = make([]*pb.WeightedDst, 0, len(sp.Spec.DstOverrides))
	for _, d := range sp.Spec.DstOverrides {
		authority := d.Authority
		if _, _, err := net.SplitHostPort(authority); err != nil {
			authority = net.JoinHostPort(authority, strconv.FormatUint(uint64(port), 10))
		}
		// Weights are in ten-thousandths: 10000 is all of the traffic.
		p.DstOverrides = append(p.DstOverrides, &pb.WeightedDst{Authority: authority, Weight: uint32(d.Weight.MilliValue() * 10)})
	}
	return p
}

// duration is d as the proxy API's duration, nil for none.
func duration(d time.Duration) *durationpb.Duration {
	if d == 0 {
		return nil
	}
	return durationpb.New(d)
}

func route(r *translator.RouteSpec) *pb.Route {
	timeout, _ := time.ParseDuration(r.Timeout) // checked by CheckServiceProfile; "" is none
	out := &pb.Route{
		Condition:       requestMatch(r.Condition),
		ResponseClasses: make([]*pb.ResponseClass, 0, len(r.ResponseClasses)),
		MetricsLabels:   map[string]string{"route": r.Name},
		IsRetryable:     r.IsRetryable,
		Timeout:         duration(timeout),
	}
	for _, rc := range r.ResponseClasses {
		out.ResponseClasses = append(out.ResponseClasses, &pb.ResponseClass{Condition: responseMatch(rc.Condition), IsFailure: rc.IsFailure})
	}
	return out
}

// requestMatch translates a request condition: its fields in Linkerd's order (all, any,
// method, not, pathRegex), one alone as it is, several as an "all" of them.
func requestMatch(m *translator.RequestMatch) *pb.RequestMatch {
	var ms []*pb.RequestMatch
	if m.All != nil {
		ms = append(ms, &pb.RequestMatch{Match: &pb.RequestMatch_All{All: &pb.RequestMatch_Seq{Matches: requestMatches(m.All)}}})
	}
	if m.Any != nil {
		ms = append(ms, &pb.RequestMatch{Match: &pb.RequestMatch_Any{Any: &pb.RequestMatch_Seq{Matches: requestMatches(m.Any)}}})
	}
	if m.Method != "" {
		ms = append(ms, &pb.RequestMatch{Match: &pb.RequestMatch_Method{Method: httpMethod(m.Method)}})
	}
	if m.Not != nil {
		ms = append(ms, &pb.RequestMatch{Match: &pb.RequestMatch_Not{Not: requestMatch(m.Not)}})
	}
	if m.PathRegex != "" {
		ms = append(ms, &pb.RequestMatch{Match: &pb.RequestMatch_Path{Path: &pb.PathMatch{Regex: m.PathRegex}}})
	}
	if len(ms) == 1 {
		return ms[0]
	}
	return &pb.RequestMatch{Match: &pb.RequestMatch_All{All: &pb.RequestMatch_Seq{Matches: ms}}}
}

func requestMatches(ms []*translator.RequestMatch) []*pb.RequestMatch {
	out := make([]*pb.RequestMatch, len(ms))
	for i, m := range ms {
		out[i] = requestMatch(m)
	}
	return out
}

// responseMatch translates a response condition: its fields in Linkerd's order (all, any,
// status, not), one alone as it is, several as an "all" of them.
func responseMatch(m *translator.ResponseMatch) *pb.ResponseMatch {
	var ms []*pb.ResponseMatch
	if m.All != nil {
		ms = append(ms, &pb.ResponseMatch{Match: &pb.ResponseMatch_All{All: &pb.ResponseMatch_Seq{Matches: responseMatches(m.All)}}})
	}
	if m.Any != nil {
		ms = append(ms, &pb.ResponseMatch{Match: &pb.ResponseMatch_Any{Any: &pb.ResponseMatch_Seq{Matches: responseMatches(m.Any)}}})
	}
	if s := m.Status; s != nil {
		ms = append(ms, &pb.ResponseMatch{Match: &pb.ResponseMatch_Status{Status: &pb.HttpStatusRange{Min: s.Min, Max: s.Max}}})
	}
	if m.Not != nil {
		ms = append(ms, &pb.ResponseMatch{Match: &pb.ResponseMatch_Not{Not: responseMatch(m.Not)}})
	}
	if len(ms) == 1 {
		return ms[0]
	}
	return &pb.ResponseMatch{Match: &pb.ResponseMatch_All{All: &pb.ResponseMatch_Seq{Matches: ms}}}
}

func responseMatches(ms []*translator.ResponseMatch) []*pb.ResponseMatch {
	out := make([]*pb.ResponseMatch, len(ms))
	for i, m := range ms {
		out[i] = responseMatch(m)
	}
	return out
}

// httpMethod is a method as the proxy API names it: one of the registered methods, or the
// method itself (upper-cased).
func httpMethod(m string) *httppb.HttpMethod {
	m = strings.ToUpper(m)
	if v, ok := httppb.HttpMethod_Registered_value[m]; ok {
		return &httppb.HttpMethod{Type: &httppb.HttpMethod_Registered_{Registered: httppb.HttpMethod_Registered(v)}}
	}
	return &httppb.HttpMethod{Type: &httppb.HttpMethod_Unregistered{Unregistered: m}}
}
