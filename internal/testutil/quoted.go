package testutil

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// WantQuotedInvalid checks the error of a call given bad input (what names the call and the
// input): it must be InvalidArgument, its message at most 1 KiB (a short prefix of the input
// quoted, not all of it), with no byte shown as a Latin-1 rune ("Ã"), and containing each of
// want. It reports with Errorf, so that one test can check several calls.
func WantQuotedInvalid(t testing.TB, what string, err error, want ...string) {
	t.Helper()
	st := status.Convert(err)
	if st.Code() != codes.InvalidArgument {
		t.Errorf("%s: %.300v, want InvalidArgument", what, err)
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
