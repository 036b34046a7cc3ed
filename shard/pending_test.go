package shard

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"

	pb "github.com/linkerd/linkerd2-proxy-api/go/destination"
	"github.com/meridian-mesh/meridian/internal/testutil"
	"github.com/meridian-mesh/meridian/translator"
)

// blockingSource is a pushSource whose Pod lookup of one pod waits until released, which
// holds the index's one worker in the recompute of the service that names the pod.
type blockingSource struct {
	*pushSource
	block   string        // "namespace/name" of the pod whose lookup waits
	entered chan struct{} // closed when that lookup first waits
	release chan struct{}
	once    sync.Once
}

func (s *blockingSource) Pod(ns, name string) *translator.Pod {
	if ns+"/"+name == s.block {
		s.once.Do(func() { close(s.entered) })
		<-s.release
	}
	return s.pushSource.Pod(ns, name)
}

// TestNewStreamSeesQueuedChanges: a stream that opens while a change of its service waits
// for the index's worker is given the service as the index holds it, not the snapshot
// published before the change. The Kubernetes handover test saw the difference: a replica
// that had just loaded its share published a Service before its slices arrived, and a
// stream moving to it in between was told that the service had no endpoints, then given
// them.
func TestNewStreamSeesQueuedChanges(t *testing.T) {
	src := &blockingSource{pushSource: newPushSource(), block: "ns/blocker-0", entered: make(chan struct{}), release: make(chan struct{})}
	cfg := DefaultConfig()
	cfg.Workers = 1
	reg := prometheus.NewRegistry()
	r, client := startReplica(t, cfg, Deps{Source: src, Registerer: reg, Logger: zaptest.NewLogger(t)}, 10*time.Second)
	t.Cleanup(func() { close(src.release) }) // before the replica stops: cleanups run last first
	h := src.handler(t)

	// web is published without endpoints.
	web := NewServiceKey("ns", "web")
	h.OnService(svcObj("ns", "web"), false)
	testutil.Eventually(t, 10*time.Second, "web published", func() bool { return r.Store().Load(viewKey(web, 80, "")) != nil })

	// The one worker waits in blocker's recompute; web's slice is queued behind it.
	h.OnPod(podObj("ns", "blocker-0", "10.0.0.9", false), false)
	h.OnService(svcObj("ns", "blocker"), false)
	h.OnEndpointSlice(sliceObj("ns", "blocker", "blocker-1", 8080, epSpec{ip: "10.0.0.9", pod: "blocker-0", ready: true}), false)
	select {
	case <-src.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the worker did not reach blocker's pod")
	}
	h.OnEndpointSlice(sliceObj("ns", "web", "web-1", 8080, epSpec{ip: "10.0.0.1", ready: true}), false)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	gs, err := client.Get(ctx, &pb.GetDestination{Scheme: "k8s", Path: "web.ns.svc.cluster.local:80"})
	if err != nil {
		t.Fatal(err)
	}
	s := newStream(gs)
	if u := s.next(t); kind(u) != "add" || len(addrs(u)) != 1 || addrs(u)[0] != "10.0.0.1:8080" {
		t.Fatalf("first update %s %v; want add [10.0.0.1:8080]", kind(u), addrs(u))
	}
}
