package charttest_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"maps"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/meridian-mesh/meridian/internal/charttest"
)

// TestGossipKeySecretRotation follows the Secret linkerd-dst-gossip-key through a rotation
// done with helm values, and through one done by editing the Secret: the keys given are
// rendered as gossip.key and accepted-N.key, and accepted keys added with kubectl to the
// chart's generated key are kept by an upgrade.
func TestGossipKeySecretRotation(t *testing.T) {
	f := newFixture(t)
	f.install(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	get := func() map[string][]byte {
		t.Helper()
		return f.secret(ctx, t, "linkerd-dst-gossip-key").Data
	}
	upgrade := func(set ...string) map[string][]byte {
		t.Helper()
		args := []string{"upgrade", "meridian", charttest.ChartDir(), "-n", f.ns, "-f", f.identity}
		for _, s := range set {
			args = append(args, "--set", s)
		}
		f.helm(t, args...)
		return get()
	}
	newKey := func() string {
		b := make([]byte, 32)
		_, _ = rand.Read(b)
		return base64.StdEncoding.EncodeToString(b)
	}
	keys := func(d map[string][]byte) []string { return slices.Sorted(maps.Keys(d)) }

	// The generated key, and an accepted key added with kubectl, survive an upgrade.
	generated := get()
	next := newKey()
	f.editSecret(ctx, t, "linkerd-dst-gossip-key", func(s *corev1.Secret) { s.Data["accepted-next.key"] = []byte(next) })
	if got := upgrade(); string(got["gossip.key"]) != string(generated["gossip.key"]) || string(got["accepted-next.key"]) != next {
		t.Fatalf("after an upgrade the Secret holds %v, want the generated gossip.key and accepted-next.key kept", keys(got))
	}

	// A rotation through values: A primary with B accepted, then B with A, then B alone.
	a, b := newKey(), newKey()
	for _, step := range []struct {
		set  []string
		want map[string]string
	}{
		{[]string{"destination.gossipKey.value=" + a, "destination.gossipKey.accepted={" + b + "}"}, map[string]string{"gossip.key": a, "accepted-1.key": b}},
		{[]string{"destination.gossipKey.value=" + b, "destination.gossipKey.accepted={" + a + "}"}, map[string]string{"gossip.key": b, "accepted-1.key": a}},
		{[]string{"destination.gossipKey.value=" + b}, map[string]string{"gossip.key": b}},
	} {
		got := upgrade(step.set...)
		if len(got) != len(step.want) {
			t.Fatalf("%v: the Secret holds %v, want %d keys", step.set, keys(got), len(step.want))
		}
		for k, v := range step.want {
			if string(got[k]) != v {
				t.Fatalf("%v: %s = %q, want %q", step.set, k, got[k], v)
			}
		}
	}
}
