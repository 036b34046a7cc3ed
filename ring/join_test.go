package ring

import (
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/meridian-mesh/meridian/internal/testutil"
)

// TestClusterSplitMerges: two rings that formed apart, each of two members (so neither
// member is alone), merge once their seeds name the other ring's members, as after a
// partition of a ring behind a headless Service heals.
func TestClusterSplitMerges(t *testing.T) {
	ips := []string{"127.0.0.1", "127.0.0.2", "127.0.0.3", "127.0.0.4"}
	l, err := net.Listen("tcp", "127.0.0.4:0")
	if err != nil {
		t.Skipf("127.0.0.4 not usable here: %v", err)
	}
	l.Close()
	port := freePort(t, ips...)
	dns := &fakeDNS{}
	dns.set("left.test", ips[0], ips[1])
	dns.set("right.test", ips[2], ips[3])
	start := func(name, ip, seed string) *node {
		return startNodeWith(t, name, func(cfg *Config) {
			cfg.GossipAddr = fmt.Sprintf("%s:%d", ip, port)
			cfg.GRPCAddr = ip + ":8086"
			cfg.Join = []string{seed}
			cfg.lookupNetIP = dns.lookup
		})
	}
	a, b := start("a", ips[0], "left.test"), start("b", ips[1], "left.test")
	c, d := start("c", ips[2], "right.test"), start("d", ips[3], "right.test")
	waitConverged(t, []*node{a, b}, "a,b")
	waitConverged(t, []*node{c, d}, "c,d")

	dns.set("left.test", ips...)
	waitConverged(t, []*node{a, b, c, d}, "a,b,c,d")
}

// TestClusterNotJoinedOnceClosed: Close while Run runs turns Joined false for good; the join
// loop, which goes on until Run's context ends, used to set it true again at its next
// attempt (here: seeds that name no other member).
func TestClusterNotJoinedOnceClosed(t *testing.T) {
	dns := &fakeDNS{}
	dns.set("solo.test")
	n := startNodeWith(t, "solo", func(cfg *Config) {
		cfg.Join = []string{"solo.test"}
		cfg.lookupNetIP = dns.lookup
	})
	testutil.Eventually(t, converge, "solo to be joined alone", n.Joined)
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	// Several rejoin attempts (every 200 ms in the test configuration).
	for range 10 {
		if n.Joined() {
			t.Fatal("joined again after Close")
		}
		time.Sleep(100 * time.Millisecond)
	}
}
