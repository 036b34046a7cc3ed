package main

import (
	"strings"
	"testing"
)

func TestCheckUsageErrors(t *testing.T) {
	for _, args := range [][]string{{"check", "-o", "yaml"}, {"check", "extra"}} {
		if code, _, errOut := capture(t, args...); code != 2 || !strings.Contains(errOut, "meridian check") {
			t.Errorf("meridian %s = exit %d %q, want 2", strings.Join(args, " "), code, errOut)
		}
	}
}
