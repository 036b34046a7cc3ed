package shard

import (
	"bytes"
	"fmt"
	"runtime"
	"runtime/debug"
	"sync/atomic"
	"testing"
	"time"
	"unique"

	pb "github.com/linkerd/linkerd2-proxy-api/go/destination"
	"google.golang.org/protobuf/proto"

	"github.com/meridian-mesh/meridian/internal/testutil"
	"github.com/meridian-mesh/meridian/snapshot"
)

// TestServerCodecEncodesAsProto checks that the replica's server codec writes what gRPC's
// proto codec writes, for a small update and for one large enough to get its own buffer, and
// reads it back.
func TestServerCodecEncodesAsProto(t *testing.T) {
	for _, n := range []int{1, 200} {
		eps := make([]*snapshot.Endpoint, n)
		for i := range eps {
			eps[i] = &snapshot.Endpoint{Addr: netipMust(fmt.Sprintf("10.0.%d.%d:80", i/250, i%250+1)), Weight: 10000,
				ID: unique.Make("web.ns.serviceaccount.identity.linkerd.cluster.local")}
		}
		u := addUpdate(nil, eps)
		want, err := protoCodec.Marshal(u)
		if err != nil {
			t.Fatal(err)
		}
		got, err := serverCodec{}.Marshal(u)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Materialize(), want.Materialize()) {
			t.Fatalf("%d endpoints: the codecs' encodings differ", n)
		}
		if n > 100 && len(got.Materialize()) <= ownBufferAbove {
			t.Fatalf("%d endpoints encode in %d bytes: not above %d, the own-buffer path is not tested", n, len(got.Materialize()), ownBufferAbove)
		}
		var back pb.Update
		if err := (serverCodec{}).Unmarshal(got, &back); err != nil || !proto.Equal(&back, u) {
			t.Fatalf("%d endpoints: read back %v, %v", n, err, &back)
		}
		got.Free()
		want.Free()
	}
}

// countingBuffers is a mem.BufferPool that allocates each buffer, as mem.NopBufferPool
// does, and counts the buffers handed out, handed back, and collected.
type countingBuffers struct{ got, put, collected atomic.Int64 }

func (c *countingBuffers) Get(n int) *[]byte {
	b := make([]byte, n)
	c.got.Add(1)
	runtime.AddCleanup(&b[0], func(c *countingBuffers) { c.collected.Add(1) }, c)
	return &b
}

func (c *countingBuffers) Put(*[]byte) { c.put.Add(1) }

// TestLargeBufferFreedOnceWritten opens Get streams on a replica's real gRPC server from a
// client process (as BenchmarkStreamMemory does), each of whose first update is large
// enough for a buffer of its own, and checks that once the clients hold their first updates
// every such buffer was handed back, and that one collection frees them all: gRPC keeps no
// reference to a written message's bytes. With a SliceBuffer, about half of them outlived
// that collection, held by gRPC's pooled list nodes (see serverCodec).
func TestLargeBufferFreedOnceWritten(t *testing.T) {
	const streams = 500
	bufs := &countingBuffers{}
	saved := largeBuffers
	largeBuffers = bufs
	t.Cleanup(func() { largeBuffers = saved }) // after the replica has stopped
	front, _, names := benchCluster(t, false, streams)
	stop := startStreamClients(t, front.addr, 4, streams, "get", names)
	defer stop()
	// Every first update took the own-buffer path, and gRPC freed each once it had written
	// it (the client holds it, so it was written).
	if got := bufs.got.Load(); got < streams {
		t.Fatalf("%d large buffers for %d first updates of %d endpoints: the path is not tested", got, streams, benchWidth)
	}
	testutil.Eventually(t, 10*time.Second, "every large buffer handed back", func() bool { return bufs.put.Load() == bufs.got.Load() })
	// One collection, and no other while the cleanups report.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	runtime.GC()
	testutil.Eventually(t, 10*time.Second, "every large buffer collected after one collection", func() bool {
		return bufs.collected.Load() == bufs.got.Load()
	})
}
