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
