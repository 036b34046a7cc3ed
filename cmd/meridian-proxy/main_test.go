package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"

	"github.com/meridian-mesh/meridian/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.Main(m, nil)) }

// TestCommandLine: help exits 0 and lists the flags, a bad flag or argument is a usage error
// (2), a missing setting is an error (1) that names the variable and its flag, as for
// `meridian proxy`.
func TestCommandLine(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want []string
	}{
		{[]string{"-h"}, 0, []string{"usage: meridian-proxy", "-destination-svc-addr"}},
		{[]string{"proxy", "--no-such-flag"}, 2, []string{"no-such-flag", "meridian-proxy -h"}},
		{[]string{"extra"}, 2, []string{"unexpected arguments"}},
		{nil, 1, []string{"LINKERD2_PROXY_DESTINATION_SVC_ADDR", "--destination-svc-addr"}},
	} {
		for _, k := range []string{"LINKERD2_PROXY_DESTINATION_SVC_ADDR", "LINKERD2_PROXY_IDENTITY_SVC_ADDR"} {
			t.Setenv(k, "")
			os.Unsetenv(k)
		}
		var stdout, stderr bytes.Buffer
		code := exitCode(run(context.Background(), tc.args, &stdout), &stderr)
		out := stdout.String() + stderr.String()
		if code != tc.code {
			t.Errorf("%v: exit %d, want %d (%q)", tc.args, code, tc.code, out)
		}
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("%v: output %q lacks %q", tc.args, out, w)
			}
		}
	}
}
