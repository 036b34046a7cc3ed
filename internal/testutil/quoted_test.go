package testutil

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestWantQuotedInvalid(t *testing.T) {
	WantQuotedInvalid(t, "ok", status.Error(codes.InvalidArgument, `name "abc"... (9 bytes)`), `"abc"`, "(9 bytes)")
	for _, c := range []struct {
		name string
		err  error
		want string
	}{
		{"another code", status.Error(codes.NotFound, "x (9 bytes)"), "another code: rpc error: code = NotFound desc = x (9 bytes), want InvalidArgument"},
		{"too long", status.Error(codes.InvalidArgument, strings.Repeat("a", 1024)+" (9 bytes)"), "too long: a 1034-byte message"},
		{"a mangled rune", status.Error(codes.InvalidArgument, "wÃ©b (9 bytes)"), "shows a byte as a rune"},
		{"a part missing", status.Error(codes.InvalidArgument, "name"), `lacks "(9 bytes)"`},
	} {
		wantFailure(t, check(t, func(r *recorder) { WantQuotedInvalid(r, c.name, c.err, "(9 bytes)") }), c.want)
	}
}
