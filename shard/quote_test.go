package shard

import (
	"context"
	"strings"
	"testing"
	"time"

	pb "github.com/linkerd/linkerd2-proxy-api/go/destination"
	"github.com/meridian-mesh/meridian/internal/testutil"
)

// TestBadPathErrorsQuoteAPrefix asks Get and GetProfile over real gRPC for paths of 1 MB and
// for a non-ASCII name: the InvalidArgument message quotes at most 256 bytes of the path, says
// how long it was, and shows 'é' as 'é' (not "Ã").
func TestBadPathErrorsQuoteAPrefix(t *testing.T) {
	e := newEnv(t, nil)
	mb := 1 << 20
	for _, c := range []struct {
		name, path string
		want       []string
	}{
		{"1 MB", strings.Repeat("a", mb), []string{`authority "` + strings.Repeat("a", 256) + `"... (1048576 bytes)`}},
		{"1 MB of NUL", strings.Repeat("\x00", mb), []string{`"` + strings.Repeat(`\x00`, 64) + `"... (1048576 bytes)`}},
		{"1 MB with a port", strings.Repeat("a", mb) + ":80", []string{"(1048579 bytes)"}},
		{"a rune", "wéb.shop.svc.cluster.local:80", []string{`service name "wéb" has "é"`}},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		gs, err := e.client.Get(ctx, &pb.GetDestination{Scheme: "k8s", Path: c.path})
		if err == nil {
			_, err = gs.Recv()
		}
		testutil.WantQuotedInvalid(t, "Get "+c.name, err, c.want...)
		ps, err := e.client.GetProfile(ctx, &pb.GetDestination{Scheme: "k8s", Path: c.path})
		if err == nil {
			_, err = ps.Recv()
		}
		testutil.WantQuotedInvalid(t, "GetProfile "+c.name, err, c.want...)
		cancel()
	}
}
