package shard

import (
	"bytes"
	"fmt"
	"testing"
	"unique"

	pb "github.com/linkerd/linkerd2-proxy-api/go/destination"
	"google.golang.org/protobuf/proto"

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
