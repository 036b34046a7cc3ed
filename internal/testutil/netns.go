package testutil

import (
	"crypto/rand"
	"encoding/hex"
	"os/exec"
	"strings"
	"testing"
)

// RunCmd runs argv and fails t, with the command and its output, unless it succeeds.
func RunCmd(t testing.TB, argv ...string) {
	t.Helper()
	if out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v: %s", strings.Join(argv, " "), err, out)
	}
}

// NewNetns creates a network namespace named mrd-<tag>-<random hex>, with lo up, and
// returns its name; it is removed when t ends. It needs root and iproute2's ip (callers
// check, and skip without them).
func NewNetns(t testing.TB, tag string) string {
	t.Helper()
	name := "mrd-" + tag + "-" + randomHex(4)
	RunCmd(t, "ip", "netns", "add", name)
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v: %s", name, err, out)
		}
	})
	RunCmd(t, "ip", "netns", "exec", name, "ip", "link", "set", "lo", "up")
	return name
}

// LinkNetns joins the network namespaces a and b (NewNetns) with a veth pair, with address
// aCIDR (such as 10.99.0.1/24) on a's end and bCIDR on b's, both up, and returns the names
// of the two ends. The pair goes away with its namespaces.
func LinkNetns(t testing.TB, a, aCIDR, b, bCIDR string) (aDev, bDev string) {
	t.Helper()
	suffix := randomHex(3)
	aDev, bDev = "va"+suffix, "vb"+suffix
	RunCmd(t, "ip", "link", "add", aDev, "netns", a, "type", "veth", "peer", "name", bDev, "netns", b)
	for _, end := range []struct{ ns, dev, cidr string }{{a, aDev, aCIDR}, {b, bDev, bCIDR}} {
		RunCmd(t, "ip", "netns", "exec", end.ns, "ip", "addr", "add", end.cidr, "dev", end.dev)
		RunCmd(t, "ip", "netns", "exec", end.ns, "ip", "link", "set", end.dev, "up")
	}
	return aDev, bDev
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
