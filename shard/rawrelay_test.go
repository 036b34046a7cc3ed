package shard

import (
	"context"
	"testing"
	"time"

	pb "github.com/linkerd/linkerd2-proxy-api/go/destination"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/protobuf/proto"

	"github.com/meridian-mesh/meridian/internal/testutil"
)

// TestRelayedGetSendsTheOwnersUpdates checks, over real sockets, that a client of a replica
// relaying a Get receives exactly the updates a client of the owner receives, through
// churn, emptying and deletion, while the relay passes them on without decoding them.
func TestRelayedGetSendsTheOwnersUpdates(t *testing.T) {
	front, owner, names := benchCluster(t, true, 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req := &pb.GetDestination{Scheme: "k8s", Path: benchPath(names[0])}
	open := func(addr string) *stream {
		s, err := pb.NewDestinationClient(testutil.DialGRPC(t, addr)).Get(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return newStream(s)
	}
	direct, relayed := open(owner.addr), open(front.addr)
	same := func(what string) {
		t.Helper()
		d, r := direct.next(t), relayed.next(t)
		if !proto.Equal(d, r) {
			t.Fatalf("%s: owner sent %v, relay sent %v", what, d, r)
		}
	}
	same("initial state")
	owner.src.OnEndpointSlice(benchSlice(0, names[0], 1), false) // every endpoint replaced
	same("remove")
	same("add")
	emptied := benchSlice(0, names[0], 1)
	emptied.Endpoints = nil
	owner.src.OnEndpointSlice(emptied, false)
	same("emptied")
	owner.src.OnService(svcObj(benchNS, names[0]), true)
	same("deleted")
	relayed.quiet(t, 100*time.Millisecond)
	if got := promtest.ToFloat64(front.rep.m.updatesSent.WithLabelValues("add")); got != 2 {
		t.Errorf("relay counted %v adds sent, want 2", got)
	}
}

// TestRelayedGetProfileSendsTheOwnersProfile checks, over real sockets, that a client of a
// replica relaying a GetProfile receives the profiles a client of the owner receives, which
// the relay passes on as the owner encoded them, each once.
func TestRelayedGetProfileSendsTheOwnersProfile(t *testing.T) {
	front, owner, names := benchCluster(t, true, 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req := &pb.GetDestination{Scheme: "k8s", Path: benchPath(names[0])}
	recv := func(addr string) <-chan *pb.DestinationProfile {
		s, err := pb.NewDestinationClient(testutil.DialGRPC(t, addr)).GetProfile(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		ch := make(chan *pb.DestinationProfile, 4)
		testutil.Go(t, "a profile stream's reader", func(stop context.Context) error {
			defer close(ch)
			for {
				p, err := s.Recv() // ends with ctx, cancelled before stop
				if err != nil {
					return nil
				}
				select {
				case ch <- p:
				case <-stop.Done():
					return nil
				}
			}
		})
		return ch
	}
	direct, relayed := recv(owner.addr), recv(front.addr)
	next := func(ch <-chan *pb.DestinationProfile, what string) *pb.DestinationProfile {
		t.Helper()
		select {
		case p, ok := <-ch:
			if !ok {
				t.Fatalf("%s: the stream ended", what)
			}
			return p
		case <-ctx.Done():
			t.Fatalf("%s: no profile", what)
		}
		return nil
	}
	same := func(what string) *pb.DestinationProfile {
		t.Helper()
		d, r := next(direct, what), next(relayed, what)
		if !proto.Equal(d, r) {
			t.Fatalf("%s: owner sent %v, relay sent %v", what, d, r)
		}
		return d
	}
	if p := same("first profile"); p.GetFullyQualifiedName() == "" || p.GetOpaqueProtocol() {
		t.Fatalf("first profile %v", p)
	}
	svc := svcObj(benchNS, names[0])
	svc.Annotations = map[string]string{"config.linkerd.io/opaque-ports": "80"}
	owner.src.OnService(svc, false)
	if p := same("port made opaque"); !p.GetOpaqueProtocol() {
		t.Fatalf("profile after the opaque-ports annotation %v", p)
	}
	owner.src.OnService(svc, false) // unchanged: nothing is sent
	select {
	case p := <-relayed:
		t.Fatalf("the relay sent %v again", p)
	case <-time.After(100 * time.Millisecond):
	}
	cancel()
}

// TestWellFormed checks what the relay takes for a protobuf message (an owner's profile,
// passed on undecoded) and what it refuses.
func TestWellFormed(t *testing.T) {
	profile, err := proto.Marshal(&pb.DestinationProfile{FullyQualifiedName: "web.shop.svc.cluster.local", OpaqueProtocol: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		b    []byte
		want bool
	}{
		{"a profile", profile, true},
		{"empty", nil, true},
		{"cut short", profile[:len(profile)-1], false},
		{"a length past the end", []byte{0x0a, 0x05, 'a'}, false},
		{"a varint that does not end", []byte{0x08, 0xff, 0xff}, false},
		{"an unknown wire type", []byte{0x0f}, false},
		{"a tag without a value", []byte{0x08}, false},
	} {
		if got := wellFormed(c.b); got != c.want {
			t.Errorf("%s (% x): wellFormed %v, want %v", c.name, c.b, got, c.want)
		}
	}
}
