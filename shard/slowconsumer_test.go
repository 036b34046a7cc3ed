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
	"github.com/meridian-mesh/meridian/shard/source"
)

// stalledClient is what the slow-consumer tests share: service shop/web (port 80 to 8080)
// with pods p0 to p<8*block-1>, whose slice moves between blocks of block endpoints, and a
// Get stream on a connection with a small, fixed HTTP/2 window, so that a client that stops
// reading really stops the server's sends. The client holds the stream's first update.
type stalledClient struct {
	e     *env
	h     source.Handler
	block int
	raw   pb.Destination_GetClient
	v     held
}

// stallClient sets up shop/web at its first block and opens the stream, alive for within.
func stallClient(t *testing.T, e *env, block int, within time.Duration) *stalledClient {
	t.Helper()
	c := &stalledClient{e: e, h: e.h(), block: block}
	c.h.OnService(svcObj("shop", "web"), false)
	for i := 0; i < 8*block; i++ {
		c.h.OnPod(podObj("shop", fmt.Sprintf("p%d", i), fmt.Sprintf("10.1.%d.%d", i/250, i%250), false), false)
	}
	c.move(0)
	waitService(t, e.replica, "shop", "web")
	conn := testutil.DialGRPC(t, e.addr, grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
	ctx, cancel := context.WithTimeout(context.Background(), within)
	t.Cleanup(cancel)
	raw, err := pb.NewDestinationClient(conn).Get(ctx, &pb.GetDestination{Path: auth})
	if err != nil {
		t.Fatal(err)
	}
	u, err := raw.Recv()
	if err != nil {
		t.Fatal(err)
	}
	c.raw = raw
	c.v.apply(t, u)
	return c
}

// endpoints is the block of endpoints of pods lo to lo+block-1.
func (c *stalledClient) endpoints(lo int) []epSpec {
	eps := make([]epSpec, 0, c.block)
	for i := lo; i < lo+c.block; i++ {
		eps = append(eps, epSpec{fmt.Sprintf("10.1.%d.%d", i/250, i%250), fmt.Sprintf("p%d", i), true, ""})
	}
	return eps
}

// move moves the service's slice to the block from pod lo.
func (c *stalledClient) move(lo int) {
	c.h.OnEndpointSlice(sliceObj("shop", "web", "s", 8080, c.endpoints(lo)...), false)
}

// moveFinal moves the slice to the last block (which the tests' cycles of 7 never produce,
// so that the client cannot match it early), waits until the index has published it, and
// returns its addresses.
func (c *stalledClient) moveFinal(t *testing.T) map[string]bool {
	t.Helper()
	c.move(7 * c.block)
	want := map[string]bool{}
	for _, ep := range c.endpoints(7 * c.block) {
		want[ep.ip+":8080"] = true
	}
	key := NewServiceKey("shop", "web")
	testutil.Eventually(t, 30*time.Second, "the index to publish the final state", func() bool {
		snap := c.e.replica.Store().Load(snapKey(key, 80))
		return snap != nil && snap.Set.Len() == len(want) && allIn(snap, want)
	})
	return want
}

// readTo has the client read again until it holds exactly want (within 30s), then checks
// that nothing more comes.
func (c *stalledClient) readTo(t *testing.T, want map[string]bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	s := newStream(c.raw)
	for !sameKeys(c.v.keys(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("client holds %d addresses, want the final %d", len(c.v.addrs), len(want))
		}
		c.v.apply(t, s.next(t))
	}
	s.quiet(t, 300*time.Millisecond)
}

// A client that stops reading while 10k updates flow: the replica's memory for it stays
// bounded (its queue coalesces), its stream stays open, and when it reads again it ends
// holding exactly the final set.
func TestSlowClientCoalescesToFinalSet(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.QueueCapacity = 8 })
	c := stallClient(t, e, 40, 2*time.Minute)
	// The client now stops reading while 10k changes flow through the index; each moves the
	// service to another block of 40 endpoints, so that every delta is large.
	const updates = 10000
	for i := 1; i <= updates; i++ {
		c.move(40 * (i % 7))
	}
	want := c.moveFinal(t)
	if got := promtest.ToFloat64(e.replica.m.overflow); got == 0 {
		t.Fatal("expected the stalled stream's queue to overflow and coalesce")
	}
	c.readTo(t, want)
	t.Logf("client applied %d updates for %d changes (coalescings: %v)", c.v.updates, updates, promtest.ToFloat64(e.replica.m.overflow))
}

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
	c := stallClient(t, e, block, duration+2*time.Minute)

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
			c.move(block * (changes % 7))
		case <-sample.C:
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapInuse)
		}
	}
	want := c.moveFinal(t)
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
	c.readTo(t, want)
}
