package shard

import (
	"context"
	"errors"
	"fmt"

	pb "github.com/linkerd/linkerd2-proxy-api/go/destination"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	corev1 "k8s.io/api/core/v1"

	"github.com/meridian-mesh/meridian/snapshot"
	"github.com/meridian-mesh/meridian/translator"
)

// Server implements io.linkerd.proxy.destination.Destination over an Index.
type Server struct {
	pb.UnimplementedDestinationServer
	cfg  Config
	idx  *Index
	m    *metrics
	log  *zap.Logger
	stop <-chan struct{}
}

var _ pb.DestinationServer = (*Server)(nil)

// NewServer returns a Destination server. Streams end (status Unavailable, so clients
// reconnect elsewhere) when stop is closed.
func NewServer(cfg Config, idx *Index, m *metrics, log *zap.Logger, stop <-chan struct{}) *Server {
	return &Server{cfg: cfg, idx: idx, m: m, log: log, stop: stop}
}

// resolve parses a request path and finds its Service.
func (s *Server) resolve(path string) (translator.Target, *corev1.Service, error) {
	t, err := translator.ParseAuthority(s.cfg.Translator, path)
	if err != nil {
		return t, nil, status.Error(codes.InvalidArgument, err.Error())
	}
	svc := s.idx.Service(ServiceKey{t.Namespace, t.Service})
	if svc == nil {
		return t, nil, status.Errorf(codes.NotFound, "service %s.%s not found (authority %q)", t.Service, t.Namespace, path)
	}
	if translator.IsExternalName(svc) {
		return t, nil, status.Errorf(codes.InvalidArgument, "service %s.%s is of type ExternalName (%s) and has no endpoints to discover", t.Service, t.Namespace, svc.Spec.ExternalName)
	}
	return t, svc, nil
}

// Get streams the endpoints of a service port: the current set first (or NoEndpoints at
// once), then deltas.
func (s *Server) Get(req *pb.GetDestination, stream pb.Destination_GetServer) error {
	t, _, err := s.resolve(req.GetPath())
	if err != nil {
		return err
	}
	sub, release := s.idx.Watch(ServiceKey{t.Namespace, t.Service}, t.Port)
	if sub == nil {
		return status.Errorf(codes.NotFound, "service %s.%s not found", t.Service, t.Namespace)
	}
	defer release()
	s.m.streams.WithLabelValues("get").Inc()
	defer s.m.streams.WithLabelValues("get").Dec()
	st := &streamState{hostname: t.Hostname}
	return s.pump(stream.Context(), sub, func(d snapshot.Delta) error {
		for _, u := range st.encode(d) {
			if err := stream.Send(u); err != nil {
				return err
			}
			s.countSent(u)
		}
		return nil
	})
}

func (s *Server) countSent(u *pb.Update) {
	switch u.GetUpdate().(type) {
	case *pb.Update_Add:
		s.m.updatesSent.WithLabelValues("add").Inc()
	case *pb.Update_Remove:
		s.m.updatesSent.WithLabelValues("remove").Inc()
	case *pb.Update_NoEndpoints:
		s.m.updatesSent.WithLabelValues("no_endpoints").Inc()
	}
}

// pump feeds sub's deltas to send until the stream or the server ends.
func (s *Server) pump(ctx context.Context, sub *snapshot.Subscription, send func(snapshot.Delta) error) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-s.stop:
			return status.Error(codes.Unavailable, "destination replica shutting down")
		case <-sub.C():
		}
		for {
			d, ok := sub.Next()
			if !ok {
				break
			}
			if err := send(d); err != nil {
				if errors.Is(err, context.Canceled) || status.Code(err) == codes.Canceled {
					return nil
				}
				return err
			}
		}
	}
}

// GetProfile streams the profile of a service port: its fully qualified name, the default
// retry budget and whether the port is opaque; a port the Service does not declare gets the
// default profile. A new profile is sent whenever the Service changes it.
func (s *Server) GetProfile(req *pb.GetDestination, stream pb.Destination_GetProfileServer) error {
	t, _, err := s.resolve(req.GetPath())
	if err != nil {
		return err
	}
	k := ServiceKey{t.Namespace, t.Service}
	sub, release := s.idx.Watch(k, t.Port)
	if sub == nil {
		return status.Errorf(codes.NotFound, "service %s.%s not found", t.Service, t.Namespace)
	}
	defer release()
	s.m.streams.WithLabelValues("get_profile").Inc()
	defer s.m.streams.WithLabelValues("get_profile").Dec()
	var last *pb.DestinationProfile
	var hostSt *streamState
	if t.Hostname != "" {
		hostSt = &streamState{hostname: t.Hostname}
	}
	var endpoint *pb.WeightedAddr
	return s.pump(stream.Context(), sub, func(d snapshot.Delta) error {
		if hostSt != nil {
			hostSt.encode(d)
			endpoint = nil
			for _, e := range d.To.Sorted() {
				if e.Hostname == t.Hostname {
					endpoint = weightedAddr(e)
					break
				}
			}
		}
		p := s.profile(t, s.idx.Service(k), endpoint)
		if last != nil && proto.Equal(last, p) {
			return nil
		}
		last = p
		return stream.Send(p)
	})
}

func (s *Server) profile(t translator.Target, svc *corev1.Service, endpoint *pb.WeightedAddr) *pb.DestinationProfile {
	fqn := fmt.Sprintf("%s.%s.svc.%s", t.Service, t.Namespace, s.cfg.Translator.ClusterDomain)
	if t.Hostname != "" {
		fqn = t.Hostname + "." + fqn
	}
	p := &pb.DestinationProfile{
		FullyQualifiedName: fqn,
		RetryBudget: &pb.RetryBudget{
			RetryRatio:          s.cfg.RetryRatio,
			MinRetriesPerSecond: s.cfg.RetryMinPerSecond,
			Ttl:                 durationpb.New(s.cfg.RetryTTL),
		},
		Endpoint: endpoint,
	}
	if svc != nil && servicePortDeclared(svc, t.Port) {
		p.OpaqueProtocol = serviceOpaque(s.cfg.Translator, svc, t.Port)
	}
	return p
}

func servicePortDeclared(svc *corev1.Service, port uint32) bool {
	for _, p := range svc.Spec.Ports {
		if uint32(p.Port) == port {
			return true
		}
	}
	return false
}

// serviceOpaque applies the opaque-ports rule to a Service port: the Service's
// config.linkerd.io/opaque-ports annotation, else the default opaque ports.
func serviceOpaque(cfg translator.Config, svc *corev1.Service, port uint32) bool {
	holder := &corev1.Pod{}
	holder.Annotations = svc.Annotations
	return translator.IsOpaque(cfg, holder, port)
}
