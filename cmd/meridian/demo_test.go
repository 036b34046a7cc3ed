package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

// TestDemoOnce runs what `make run` runs, on the shipped example cluster, and checks that it
// serves and prints endpoints.
func TestDemoOnce(t *testing.T) {
	var out bytes.Buffer
	stdout = &out
	defer func() { stdout = os.Stdout }()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err := runDemo(ctx, []string{"--once", "--dir", "../../deploy/examples", "--addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0"})
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, out.String())
	}
	s := out.String()
	for _, want := range []string{"Meridian local mesh", "NAMESPACE", "IDENTITY", "serviceaccount.identity.linkerd.cluster.local", "no endpoints"} {
		if !strings.Contains(s, want) {
			t.Errorf("demo output lacks %q:\n%s", want, s)
		}
	}
	t.Log(s)
}
