package policy

import (
	"strings"
	"testing"

	"github.com/linkerd/linkerd2-proxy-api/go/inbound"
	"github.com/meridian-mesh/meridian/internal/testutil"
)

// TestBadWorkloadErrorsQuoteAPrefix sends workloads of 1 MB and a non-ASCII one over real
// gRPC: the InvalidArgument message quotes at most 256 bytes of the workload, says how long it
// was, and shows 'é' as 'é'.
func TestBadWorkloadErrorsQuoteAPrefix(t *testing.T) {
	env, ctx := startSeeded(t)
	mb := 1 << 20
	for _, c := range []struct {
		name, workload string
		want           []string
	}{
		{"1 MB legacy", strings.Repeat("a", mb), []string{`invalid workload "` + strings.Repeat("a", 256) + `"... (1048576 bytes)`}},
		{"1 MB of NUL", strings.Repeat("\x00", mb), []string{`"` + strings.Repeat(`\x00`, 64) + `"... (1048576 bytes)`}},
		{"1 MB pod name", "shop:" + strings.Repeat("a", mb), []string{"(1048581 bytes): name ", "(1048576 bytes)"}},
		{"1 MB JSON", `{"ns":"shop","pod":"` + strings.Repeat("b", mb) + `"}`, []string{"(1048598 bytes)"}},
		{"a rune in JSON", `{"ns":"shop","pod":"wéb"}`, []string{`name "wéb"`}},
		{"a rune, legacy", "shop:wéb", []string{`invalid workload "shop:wéb": name "wéb"`}},
		{"a rune in the namespace", "shöp:web", []string{`namespace "shöp"`}},
	} {
		spec := &inbound.PortSpec{Workload: c.workload, Port: 8080}
		_, err := env.client.GetPort(ctx, spec)
		testutil.WantQuotedInvalid(t, "GetPort "+c.name, err, c.want...)
		stream, err := env.client.WatchPort(ctx, spec)
		if err == nil {
			_, err = stream.Recv()
		}
		testutil.WantQuotedInvalid(t, "WatchPort "+c.name, err, c.want...)
	}
}
