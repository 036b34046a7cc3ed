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

// TestColdStartQuietRing: without an expected count, members settle once the ring, of two
// or more, has not changed for a sixth of the wait (5s of 30s here: well before the wait runs
// out); a member alone does not (the others may be slow to start), and settles only when
// the wait runs out, though it never joined.
func TestColdStartQuietRing(t *testing.T) {
	const wait = 30 * time.Second
	began := time.Now()
	a := coldStartNode(t, "a", wait, 0)
	b := coldStartNode(t, "b", wait, 0, a.GossipAddr())
	waitConverged(t, []*node{a, b}, "a,b")
	for _, n := range []*node{a, b} {
		testutil.Eventually(t, wait-time.Since(began)-2*time.Second, n.Self().Name+" to settle once the ring is quiet", n.Settled)
	}
	lone := coldStartNode(t, "lone", 3*time.Second, 0, "127.0.0.1:1")
	testutil.Never(t, 1500*time.Millisecond, "a member alone to settle once its ring of one is quiet (0.5s)", lone.Settled)
	testutil.Eventually(t, converge, "a member whose seeds never answer to settle when the wait runs out", lone.Settled)
	if lone.Joined() {
		t.Error("the lone member joined a cluster")
	}
}

// TestColdStartLeaverIsNotServing: a member that leaves during its wait (a pod deleted at
// install) advertises that it is leaving, not that it serves: the others keep waiting.
func TestColdStartLeaverIsNotServing(t *testing.T) {
	a := coldStartNode(t, "a", 10*time.Minute, 3)
	b := coldStartNode(t, "b", 10*time.Minute, 3, a.GossipAddr())
	waitConverged(t, []*node{a, b}, "a,b")
	b.stop(t)
	testutil.Eventually(t, converge, "a to see b gone", func() bool { return a.Ring().Len() == 1 })
	testutil.Never(t, time.Second, "a to settle after b left", a.Settled)
}

// TestColdStartFormedExpires: a member advertises the size of the ring it formed for as long
// as the wait only; a replica restarting afterwards into a ring scaled down below that size
// settles at once, though it expects more.
func TestColdStartFormedExpires(t *testing.T) {
	const wait = 2 * time.Second
	nodes := []*node{coldStartNode(t, "a", wait, 4)}
	for _, name := range []string{"b", "c", "d"} {
		nodes = append(nodes, coldStartNode(t, name, wait, 4, nodes[0].GossipAddr()))
	}
	waitConverged(t, nodes, "a,b,c,d")
	for _, n := range nodes {
		testutil.Eventually(t, converge, n.Self().Name+" to settle", n.Settled)
	}
	nodes[2].stop(t)
	nodes[3].stop(t)
	waitConverged(t, nodes[:2], "a,b")
	testutil.Eventually(t, converge, "a and b to drop the size of the ring they formed", func() bool {
		return nodes[1].servingPeer(2) && nodes[0].servingPeer(2)
	})
	e := coldStartNode(t, "e", 10*time.Minute, 10, nodes[0].GossipAddr())
	testutil.Eventually(t, converge, "e to settle beside serving members (a ring of 3, not the 4 they formed)", e.Settled)
}
