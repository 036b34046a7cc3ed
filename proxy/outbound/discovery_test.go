package outbound

import (
	"net/http"
	"testing"

	pb "github.com/linkerd/linkerd2-proxy-api/go/destination"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/meridian-mesh/meridian/internal/testutil"
	"github.com/meridian-mesh/meridian/internal/wire"
	"github.com/meridian-mesh/meridian/proxy/discovery"
	"github.com/meridian-mesh/meridian/proxy/internal/proxytest"
)

// destination answers Get and GetProfile for the meshed web service (one endpoint: the stub,
// with its identity and the opaque transport), and InvalidArgument for anything else.
type destination struct {
	pb.UnimplementedDestinationServer
	web *pb.WeightedAddr
}

func (d *destination) Get(req *pb.GetDestination, s pb.Destination_GetServer) error {
	if req.GetPath() != webAuth {
		return status.Error(codes.InvalidArgument, "not a mesh name")
	}
	set := &pb.WeightedAddrSet{Addrs: []*pb.WeightedAddr{d.web}, MetricLabels: map[string]string{"namespace": "shop", "service": "web"}}
	if err := s.Send(&pb.Update{Update: &pb.Update_Add{Add: set}}); err != nil {
		return err
	}
	<-s.Context().Done()
	return nil
}

func (d *destination) GetProfile(req *pb.GetDestination, s pb.Destination_GetProfileServer) error {
	if req.GetPath() != webAuth {
		return status.Error(codes.InvalidArgument, "not a mesh name")
	}
	if err := s.Send(&pb.DestinationProfile{FullyQualifiedName: "web.shop.svc.cluster.local"}); err != nil {
		return err
	}
	<-s.Context().Done()
	return nil
}

func TestWithTheDiscoveryResolver(t *testing.T) {
	p := testutil.NewPKI(t)
	stub := startInbound(t, p, webID, "web-1")
	outside := startApp(t, "outside")
	ep := stub.endpoint(webID, 8080, true)
	d := &destination{web: &pb.WeightedAddr{
		Addr: wire.TCPAddr(ep.Addr), Weight: 10000, MetricLabels: map[string]string{"pod": "web-1"},
		TlsIdentity:  &pb.TlsIdentity{Strategy: &pb.TlsIdentity_DnsLikeIdentity_{DnsLikeIdentity: &pb.TlsIdentity_DnsLikeIdentity{Name: webID}}},
		ProtocolHint: &pb.ProtocolHint{OpaqueTransport: &pb.ProtocolHint_OpaqueTransport{InboundPort: uint32(ep.OpaqueTransportPort)}},
	}}
	addr := testutil.ServeGRPC(t, func(g *grpc.Server) { pb.RegisterDestinationServer(g, d) })

	pool := discovery.NewPool(grpc.WithTransportCredentials(insecure.NewCredentials()))
	t.Cleanup(func() { _ = pool.Close() })
	cfg := discovery.DefaultConfig()
	cfg.Addr = addr
	res := discovery.NewResolver(cfg, pool, nil)
	testutil.Go(t, "the resolver", res.Run)
	_, proxyAddr := startProxy(t, testConfig(), Deps{Resolver: ResolverOf(res.Resolve), TLS: proxytest.TLS(t, p, clientID)})
	c := proxyClient(t, proxyAddr)

	resp, body := get(t, c, "http://"+webAuth+"/")
	if resp.StatusCode != http.StatusOK || body != "web-1 HTTP/1.1" || resp.Header.Get("X-Client-Id") != clientID {
		t.Errorf("meshed: %d %q, client %q", resp.StatusCode, body, resp.Header.Get("X-Client-Id"))
	}
	resp, body = get(t, c, "http://"+outside.String()+"/")
	if resp.StatusCode != http.StatusOK || body != "outside HTTP/1.1" {
		t.Errorf("not a mesh name: %d %q", resp.StatusCode, body)
	}
}
