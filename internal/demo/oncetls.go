package demo

import (
	"context"
	"fmt"
	"strings"
	"time"

	pb "github.com/linkerd/linkerd2-proxy-api/go/destination"
	idpb "github.com/linkerd/linkerd2-proxy-api/go/identity"
	"github.com/linkerd/linkerd2-proxy-api/go/inbound"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// onceControlPlane checks that the control plane's gRPC is mTLS: a plaintext client is
// refused by a replica, the policy controller and identity (a TLS server answers a plaintext
// client with no gRPC at all: Unavailable), while the demo's own Destination client, with a
// certificate from identity, is served (the services it follows are in the model).
func (m *mesh) onceControlPlane(ctx context.Context, md Model) Check {
	c := Check{Name: "control plane mTLS"}
	dst, _, _ := m.addrs.Replica(0)
	pol, _ := m.addrs.Policy()
	id, _ := m.addrs.Identity()
	probes := []struct {
		name, addr string
		call       func(context.Context, *grpc.ClientConn) error
	}{
		{ReplicaName(0), dst, func(ctx context.Context, cc *grpc.ClientConn) error {
			s, err := pb.NewDestinationClient(cc).Get(ctx, &pb.GetDestination{Path: DeniedTarget})
			if err == nil {
				_, err = s.Recv()
			}
			return err
		}},
		{"policy", pol, func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := inbound.NewInboundServerPoliciesClient(cc).GetPort(ctx, &inbound.PortSpec{Workload: `{"ns":"shop","pod":"x"}`, Port: 80})
			return err
		}},
		{"identity", id, func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := idpb.NewIdentityClient(cc).Certify(ctx, &idpb.CertifyRequest{})
			return err
		}},
	}
	var served []string
	for _, p := range probes {
		if err := plaintextCall(ctx, p.addr, p.call); status.Code(err) != codes.Unavailable {
			served = append(served, fmt.Sprintf("%s (%v)", p.name, status.Code(err)))
		}
	}
	mine := m.awaitOwnCertificate(ctx, 10*time.Second)
	c.OK = len(served) == 0 && mine == nil && len(md.Services) > 0
	c.Detail = fmt.Sprintf("a plaintext client is refused by %s, policy and identity; the proxies and the demo's Destination client (%s) reach them over mTLS",
		ReplicaName(0), m.tls.Name())
	switch {
	case len(served) > 0:
		c.Detail = "plaintext answered by " + strings.Join(served, ", ")
	case mine != nil:
		c.Detail = "the demo's own certificate: " + mine.Error()
	}
	return c
}

// awaitOwnCertificate waits up to within for the demo's own certificate: identity starts
// with the control plane, after the demo's client, and traffic through the proxies (which
// certify on their own) can flow before the demo's first certificate arrives.
func (m *mesh) awaitOwnCertificate(ctx context.Context, within time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		err := m.tls.Ready()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-tick.C:
		}
	}
}

// plaintextCall makes call on a plaintext connection to addr, within a few seconds.
func plaintextCall(ctx context.Context, addr string, call func(context.Context, *grpc.ClientConn) error) error {
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	return call(ctx, cc)
}
