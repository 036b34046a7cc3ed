package policy

import (
	"strings"
	"testing"

	"github.com/linkerd/linkerd2-proxy-api/go/inbound"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
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
		checkQuoted(t, "GetPort "+c.name, err, c.want)
		stream, err := env.client.WatchPort(ctx, spec)
		if err == nil {
			_, err = stream.Recv()
		}
		checkQuoted(t, "WatchPort "+c.name, err, c.want)
	}
}

func checkQuoted(t *testing.T, what string, err error, want []string) {
	t.Helper()
	st := status.Convert(err)
	if st.Code() != codes.InvalidArgument {
		t.Errorf("%s: %v, want InvalidArgument", what, err)
		return
	}
	msg := st.Message()
	if len(msg) > 1024 {
		t.Errorf("%s: a %d-byte message: %.300s", what, len(msg), msg)
	}
	if strings.Contains(msg, "Ã") {
		t.Errorf("%s: %s shows a byte as a rune", what, msg)
	}
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("%s: message %.400q lacks %q", what, msg, w)
		}
	}
}
