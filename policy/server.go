package policy

import (
	"context"
	"errors"

	"github.com/linkerd/linkerd2-proxy-api/go/inbound"
	"github.com/meridian-mesh/meridian/policy/compute"
	"github.com/meridian-mesh/meridian/policy/workload"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// Server implements io.linkerd.proxy.inbound.InboundServerPolicies over an Index.
type Server struct {
	inbound.UnimplementedInboundServerPoliciesServer

	idx  *Index
	log  *zap.Logger
	done <-chan struct{}
}

// NewServer returns the gRPC service. WatchPort streams end (status OK, as Linkerd's do on
// shutdown) when done is closed, so that a graceful stop does not wait for them.
func NewServer(idx *Index, log *zap.Logger, done <-chan struct{}) *Server {
	return &Server{idx: idx, log: log, done: done}
}

var _ inbound.InboundServerPoliciesServer = (*Server)(nil)

// target validates a PortSpec.
func target(spec *inbound.PortSpec) (compute.Key, uint32, error) {
	w, err := workload.Parse(spec.GetWorkload())
	if err != nil {
		return compute.Key{}, 0, status.Error(codes.InvalidArgument, err.Error())
	}
	port := spec.GetPort()
	if port == 0 || port > 65535 {
		return compute.Key{}, 0, status.Errorf(codes.InvalidArgument, "invalid port %d: want 1-65535", port)
	}
	if w.External != "" {
		return compute.Key{}, 0, status.Errorf(codes.NotFound, "external workload %s/%s not found: this controller serves pods only", w.Namespace, w.External)
	}
	return compute.Key{Namespace: w.Namespace, Name: w.Pod}, port, nil
}

func notFound(pod compute.Key) error {
	return status.Errorf(codes.NotFound, "pod %s not found in namespace %s", pod.Name, pod.Namespace)
}

// GetPort returns a pod port's current inbound policy.
func (s *Server) GetPort(_ context.Context, spec *inbound.PortSpec) (*inbound.Server, error) {
	pod, port, err := target(spec)
	if err != nil {
		return nil, err
	}
	res, err := s.idx.Lookup(pod, port)
	if errors.Is(err, ErrPodNotFound) {
		return nil, notFound(pod)
	}
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	s.logIgnored(pod, port, res)
	return res.Server, nil
}

// WatchPort streams a pod port's inbound policy: the current one first, then a new one each
// time a change of the pod or of a policy resource changes it. A stream holds one pending
// wake-up and the last message sent; when several changes arrive while it is sending, they
// are folded into one recomputation. The stream ends with OK when the pod is deleted or the
// server shuts down.
func (s *Server) WatchPort(spec *inbound.PortSpec, stream inbound.InboundServerPolicies_WatchPortServer) error {
	pod, port, err := target(spec)
	if err != nil {
		return err
	}
	w, err := s.idx.watch(pod)
	if errors.Is(err, ErrPodNotFound) {
		return notFound(pod)
	}
	if err != nil {
		return status.Error(codes.Internal, err.Error())
	}
	defer s.idx.unwatch(w)
	ctx := stream.Context()
	var last *inbound.Server
	for {
		res, err := s.idx.Lookup(pod, port)
		if errors.Is(err, ErrPodNotFound) {
			return nil
		}
		if err != nil {
			return status.Error(codes.Internal, err.Error())
		}
		if last != nil && proto.Equal(last, res.Server) {
			s.idx.metrics.suppressed.Inc()
		} else {
			if last == nil || res.ServerName != serverName(last) {
				s.logIgnored(pod, port, res)
			}
			if err := stream.Send(res.Server); err != nil {
				return err
			}
			s.idx.metrics.sent.Inc()
			last = res.Server
		}
		select {
		case <-w.wake:
		case <-w.gone:
			return nil
		case <-s.done:
			return nil
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		}
	}
}

func serverName(s *inbound.Server) string {
	if s.GetLabels()["kind"] == "server" {
		return s.GetLabels()["name"]
	}
	return ""
}

func (s *Server) logIgnored(pod compute.Key, port uint32, res compute.Result) {
	for _, msg := range res.Ignored {
		s.log.Info("authorization ignored", zap.String("namespace", pod.Namespace), zap.String("pod", pod.Name),
			zap.Uint32("port", port), zap.String("server", res.ServerName), zap.String("reason", msg))
	}
}
