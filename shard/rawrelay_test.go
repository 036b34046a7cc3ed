package shard

import (
	"bytes"
	"context"
	"maps"
	"testing"
	"time"

	pb "github.com/linkerd/linkerd2-proxy-api/go/destination"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
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
// the relay passes on as the owner encoded them, and nothing more. (What a handover does
// to the last profile sent: TestProfileSenderAcrossVersions, TestRingJoinMovesStreamsWithoutLoss.)
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
		t.Fatalf("after an unchanged Service, the relay sent %v", p)
	case <-time.After(100 * time.Millisecond):
	}
	cancel()
}

// sentMessages is a server stream that keeps the bytes of each encodedMessage sent on it.
type sentMessages struct {
	grpc.ServerStream
	sent [][]byte
}

func (s *sentMessages) SendMsg(m any) error {
	s.sent = append(s.sent, m.(proto.Message).ProtoReflect().GetUnknown())
	return nil
}

// TestProfileSenderAcrossVersions checks that a profile is not sent again when a handover
// passes through an owner that encodes it otherwise (its metric labels in another order, as
// an owner of an earlier version did), while a change is sent.
func TestProfileSenderAcrossVersions(t *testing.T) {
	labels := map[string]string{"namespace": "shop", "pod": "web-0", "serviceaccount": "web"}
	profile := func(labels map[string]string) *pb.DestinationProfile {
		return &pb.DestinationProfile{FullyQualifiedName: "web.shop.svc.cluster.local",
			Endpoint: &pb.WeightedAddr{Weight: 10000, MetricLabels: labels}}
	}
	// The same profile with its labels in reverse order: messages written one after the
	// other decode as one, their fields merged.
	var other []byte
	for _, k := range []string{"serviceaccount", "pod", "namespace"} {
		b, err := proto.Marshal(profile(map[string]string{k: labels[k]}))
		if err != nil {
			t.Fatal(err)
		}
		other = append(other, b...)
	}
	mine, err := proto.MarshalOptions{Deterministic: true}.Marshal(profile(labels))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(mine, other) || !sameProfile(mine, other) {
		t.Fatal("the test's two encodings are not two encodings of one profile")
	}
	out := &sentMessages{}
	ps := &profileSender{stream: out}
	step := func(what string, send func() error, want int) {
		t.Helper()
		if err := send(); err != nil {
			t.Fatal(err)
		}
		if len(out.sent) != want {
			t.Fatalf("%s: %d profiles sent, want %d", what, len(out.sent), want)
		}
	}
	ps.segment()
	step("served here", func() error { return ps.send(profile(labels)) }, 1)
	ps.segment()
	step("relayed from an owner that encodes it otherwise", func() error { return ps.sendEncoded(other) }, 1)
	ps.segment()
	step("served here again", func() error { return ps.send(profile(labels)) }, 1)
	changed := maps.Clone(labels)
	changed["pod"] = "web-1"
	step("changed", func() error { return ps.send(profile(changed)) }, 2)
	ps.segment()
	step("relayed, changed back", func() error { return ps.sendEncoded(other) }, 3)
	if !bytes.Equal(out.sent[2], other) {
		t.Fatal("the relayed profile was not sent as the owner encoded it")
	}
}
