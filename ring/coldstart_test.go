package ring

import (
	"testing"
	"time"

	"github.com/meridian-mesh/meridian/internal/testutil"
)

// coldStartNode starts a member with a cold-start wait of wait that expects expect members.
func coldStartNode(t *testing.T, name string, wait time.Duration, expect int, seeds ...string) *node {
	t.Helper()
	return startNodeWith(t, name, func(cfg *Config) {
		cfg.Join = seeds
		cfg.ColdStartWait, cfg.ExpectMembers = wait, expect
	})
}

// TestColdStartWaitsForExpectedMembers: members started together settle only once the
// expected members are present, and advertise that they are starting until then.
func TestColdStartWaitsForExpectedMembers(t *testing.T) {
	a := coldStartNode(t, "a", 10*time.Minute, 3)
	if a.Settled() {
		t.Fatal("a member with a cold-start wait is settled from New")
	}
	b := coldStartNode(t, "b", 10*time.Minute, 3, a.GossipAddr())
	waitConverged(t, []*node{a, b}, "a,b")
	testutil.Never(t, time.Second, "a or b to settle with 2 of 3 members", func() bool { return a.Settled() || b.Settled() })
	if a.servingPeer(1<<30) || b.servingPeer(1<<30) {
		t.Error("a member in a cold start's wait is seen as serving")
	}
	c := coldStartNode(t, "c", 10*time.Minute, 3, a.GossipAddr())
	waitConverged(t, []*node{a, b, c}, "a,b,c")
	for _, n := range []*node{a, b, c} {
		testutil.Eventually(t, converge, n.Self().Name+" to settle with 3 of 3 members", n.Settled)
	}
	// Once settled, each advertises that it serves, with a ring formed of 3.
	for _, n := range []*node{a, b, c} {
		testutil.Eventually(t, converge, n.Self().Name+" to see a serving peer", func() bool { return n.servingPeer(3) })
		if n.servingPeer(2) {
			t.Errorf("%s sees a peer that formed its ring with 2 members or fewer", n.Self().Name)
		}
	}
}

// TestColdStartEndsWhenAMemberServes: a member that joins a ring where one serves (a member
// without a cold-start wait, as a replica of an earlier version advertises) settles at once,
// though fewer members are present than it expects.
func TestColdStartEndsWhenAMemberServes(t *testing.T) {
	a := startNode(t, "a", nil)
	if !a.Settled() {
		t.Fatal("a member without a cold-start wait is not settled")
	}
	b := coldStartNode(t, "b", 10*time.Minute, 5, a.GossipAddr())
	waitConverged(t, []*node{a, b}, "a,b")
	testutil.Eventually(t, converge, "b to settle beside a serving member", b.Settled)
}

// TestColdStartQuietRing: without an expected count, members settle once the ring has not
// changed for a sixth of the wait; a member whose seeds never answer settles when the wait
// runs out, though it never joined.
func TestColdStartQuietRing(t *testing.T) {
	a := coldStartNode(t, "a", 3*time.Second, 0)
	b := coldStartNode(t, "b", 3*time.Second, 0, a.GossipAddr())
	waitConverged(t, []*node{a, b}, "a,b")
	for _, n := range []*node{a, b} {
		testutil.Eventually(t, converge, n.Self().Name+" to settle once the ring is quiet", n.Settled)
	}
	lone := coldStartNode(t, "lone", 2*time.Second, 0, "127.0.0.1:1")
	testutil.Eventually(t, converge, "a member whose seeds never answer to settle when the wait runs out", lone.Settled)
	if lone.Joined() {
		t.Error("the lone member joined a cluster")
	}
}
