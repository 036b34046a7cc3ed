package shard

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	pb "github.com/linkerd/linkerd2-proxy-api/go/destination"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"

	"github.com/meridian-mesh/meridian/internal/testutil"
)

// TestR3SlowConsumer is issue 16's fault R3: a client that never reads, under 1,000 changes/s
// for 60 s. The replica's memory stays bounded (the stream's queue coalesces: the peak is
// reported, and a generous bound catches an unbounded queue, which would hold every one of
// the 60,000 deltas of 40 endpoints), the stream stays open, and once the client reads it
// holds exactly the final set.
func TestR3SlowConsumer(t *testing.T) {
	if testing.Short() {
		t.Skip("a minute of churn; not in -short")
	}
	const (
		rate     = 1000 // changes per second
		duration = 60 * time.Second
		block    = 40 // endpoints per change
	)
	e := newEnv(t, func(c *Config) { c.QueueCapacity = 8 })
	h := e.h()
	h.OnService(svcObj("shop", "web"), false)
	for i := 0; i < 8*block; i++ {
		h.OnPod(podObj("shop", fmt.Sprintf("p%d", i), fmt.Sprintf("10.1.%d.%d", i/250, i%250), false), false)
	}
	mk := func(lo int) []epSpec {
		eps := make([]epSpec, 0, block)
		for i := lo; i < lo+block; i++ {
			eps = append(eps, epSpec{fmt.Sprintf("10.1.%d.%d", i/250, i%250), fmt.Sprintf("p%d", i), true, ""})
		}
		return eps
	}
	h.OnEndpointSlice(sliceObj("shop", "web", "s", 8080, mk(0)...), false)
	waitService(t, e.replica, "shop", "web")

	// A small, fixed HTTP/2 window: a client that stops reading really stops the sends.
	conn := testutil.DialGRPC(t, e.addr, grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
	ctx, cancel := context.WithTimeout(context.Background(), duration+2*time.Minute)
	defer cancel()
	raw, err := pb.NewDestinationClient(conn).Get(ctx, &pb.GetDestination{Path: auth})
	if err != nil {
		t.Fatal(err)
	}
	var v held
	u, err := raw.Recv()
	if err != nil {
		t.Fatal(err)
	}
	v.apply(t, u)

	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base, peak := ms.HeapInuse, ms.HeapInuse
	tick := time.NewTicker(time.Second / rate)
	defer tick.Stop()
	sample := time.NewTicker(250 * time.Millisecond)
	defer sample.Stop()
	end := time.Now().Add(duration)
	changes := 0
	for time.Now().Before(end) {
		select {
		case <-tick.C:
			changes++
			h.OnEndpointSlice(sliceObj("shop", "web", "s", 8080, mk(block*(changes%7))...), false)
		case <-sample.C:
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapInuse)
		}
	}
	// A final set the cycle never produced, so the client cannot match it early.
	h.OnEndpointSlice(sliceObj("shop", "web", "s", 8080, mk(7*block)...), false)
	want := map[string]bool{}
	for _, ep := range mk(7 * block) {
		want[ep.ip+":8080"] = true
	}
	key := NewServiceKey("shop", "web")
	testutil.Eventually(t, 30*time.Second, "the index to publish the final state", func() bool {
		snap := e.replica.Store().Load(snapKey(key, 80))
		return snap != nil && snap.Set.Len() == len(want) && allIn(snap, want)
	})
	coalesced := promtest.ToFloat64(e.replica.m.overflow)
	growth := int64(peak) - int64(base)
	t.Logf("R3: %d changes in %v; heap in use %d MiB at the start, peak %d MiB (+%d MiB); coalescings %v",
		changes, duration, base>>20, peak>>20, growth>>20, coalesced)
	if coalesced == 0 {
		t.Fatal("the stalled stream's queue never coalesced: the client was not stalled")
	}
	// An unbounded queue would hold tens of thousands of 40-endpoint deltas (hundreds of MiB).
	if growth > 128<<20 {
		t.Errorf("heap grew by %d MiB while the client did not read; a stalled stream must cost bounded memory", growth>>20)
	}

	// The stream is still open: the client reads again and converges on exactly the final set.
	s := newStream(raw)
	testutil.Eventually(t, 30*time.Second, "the client to hold exactly the final set", func() bool {
		if sameKeys(v.keys(), want) {
			return true
		}
		v.apply(t, recv(t, s))
		return false
	})
	expectNothing(t, s, 300*time.Millisecond)
}
