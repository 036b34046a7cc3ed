package ring

import (
	"net"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/meridian-mesh/meridian/internal/testutil"
)

// listen returns a loopback TCP listener that accepts (the kernel does, with nobody calling
// Accept), closed at the end of the test.
func listen(t *testing.T) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// startReachableTrio starts members a, b and c, which hold dead members for hold, c with a
// gRPC address that accepts connections, and waits until they form one ring.
func startReachableTrio(t *testing.T, hold time.Duration) (a, b, c *node) {
	t.Helper()
	grpc := listen(t)
	mod := func(cfg *Config) { cfg.DeadHold = hold }
	a = startNodeWith(t, "a", mod)
	b = startNodeWith(t, "b", func(cfg *Config) { mod(cfg); cfg.Join = []string{a.GossipAddr()} })
	c = startNodeWith(t, "c", func(cfg *Config) {
		mod(cfg)
		cfg.Join = []string{a.GossipAddr()}
		cfg.GRPCAddr = grpc.Addr().String()
	})
	waitConverged(t, []*node{a, b, c}, "a,b,c")
	return a, b, c
}

// TestDeadHoldCrashedButReachable: a member that stops gossiping while its gRPC address
// still accepts connections (a replica too starved to answer its probes looks so to its
// peers) stays in their rings for the hold after they declare it dead, then leaves.
func TestDeadHoldCrashedButReachable(t *testing.T) {
	a, b, c := startReachableTrio(t, 4*time.Second)
	if err := c.Close(); err != nil { // gossip stops; no leave message; its address still accepts
		t.Fatal(err)
	}
	testutil.Eventually(t, converge, "a or b to find c dead but reachable", func() bool {
		return eventCount(t, a.reg, "dead_reachable")+eventCount(t, b.reg, "dead_reachable") >= 1
	})
	// Each hold lasts 4 s from its own check, which came after this count: c is in the rings
	// of those holding it. (memberlist tells the other one by gossip, and it holds c too.)
	for _, n := range []*node{a, b} {
		if eventCount(t, n.reg, "dead_reachable") >= 1 && n.Ring().Len() != 3 {
			t.Errorf("%s dropped c while holding it: %v", n.Self().Name, n.Ring())
		}
	}
	waitConverged(t, []*node{a, b}, "a,b")
	c.stop(t)
}

// TestLeaveWhileReachable: a member that leaves on purpose (Run's context ends) leaves its
// peers' rings at once, although its gRPC address still accepts connections (a replica shuts
// its gRPC server down after it leaves the ring) and the peers hold dead members for a
// minute: its leave is not mistaken for a death to confirm.
func TestLeaveWhileReachable(t *testing.T) {
	a, b, c := startReachableTrio(t, time.Minute)
	c.stop(t) // leaves; its address still accepts
	waitConverged(t, []*node{a, b}, "a,b")
	for _, n := range []*node{a, b} {
		if got := eventCount(t, n.reg, "dead_reachable"); got != 0 {
			t.Errorf("%s: dead_reachable = %v after c left on purpose, want 0", n.Self().Name, got)
		}
	}
}

// TestDeadHoldEvents: the hold as memberlist's events drive it, on a running member: a peer
// declared dead whose address accepts stays in the ring, and its return (alive again)
// changes nothing; one whose address refuses leaves at once; one that said it was leaving
// leaves at once without a check.
func TestDeadHoldEvents(t *testing.T) {
	a := startNodeWith(t, "a", func(cfg *Config) { cfg.DeadHold = time.Minute })
	ev := eventDelegate{a.Cluster}
	peer := func(addr string, leaving bool) *memberlist.Node {
		m, err := encodeMeta(addr, DefaultHashConfig().String(), startState{})
		if leaving {
			m, err = encodeLeavingMeta(addr, DefaultHashConfig().String())
		}
		if err != nil {
			t.Fatal(err)
		}
		return &memberlist.Node{Name: "x", Addr: net.IPv4(127, 0, 0, 1), Port: 1, Meta: m}
	}
	waitLen := func(n int, what string) {
		t.Helper()
		testutil.Eventually(t, converge, what, func() bool { return a.Ring().Len() == n })
	}

	// Accepting: held, then back.
	x := peer(listen(t).Addr().String(), false)
	ev.NotifyJoin(x)
	waitLen(2, "x to join")
	changes := metricValue(t, a.reg, "ring_changes_total")
	ev.NotifyLeave(x)
	testutil.Eventually(t, converge, "the check of x", func() bool { return eventCount(t, a.reg, "dead_reachable") == 1 })
	ev.NotifyJoin(x)
	if got := eventCount(t, a.reg, "dead_revived"); got != 1 {
		t.Errorf("dead_revived = %v, want 1", got)
	}
	if a.Ring().Len() != 2 || metricValue(t, a.reg, "ring_changes_total") != changes {
		t.Fatalf("x held and back: ring %v, ring_changes_total %v -> %v; want x kept, no change", a.Ring(), changes, metricValue(t, a.reg, "ring_changes_total"))
	}

	// Refusing (a crashed process): leaves at once, well within the minute's hold.
	closed := listen(t)
	closed.Close()
	ev.NotifyUpdate(peer(closed.Addr().String(), false))
	ev.NotifyLeave(x)
	waitLen(1, "the crashed x to leave")

	// Leaving on purpose: no check.
	y := peer(listen(t).Addr().String(), true)
	ev.NotifyJoin(y)
	waitLen(2, "y to join")
	ev.NotifyLeave(y)
	waitLen(1, "y, which said it was leaving, to leave")
	if got := eventCount(t, a.reg, "dead_reachable"); got != 1 {
		t.Errorf("dead_reachable = %v after a leaving member went, want still 1", got)
	}
}

// eventCount returns ring_failure_detector_events_total{event=ev} in reg.
func eventCount(t *testing.T, reg *prometheus.Registry, ev string) float64 {
	t.Helper()
	for _, m := range testutil.Gathered(t, reg, "ring_failure_detector_events_total") {
		for _, lp := range m.GetLabel() {
			if lp.GetName() == "event" && lp.GetValue() == ev {
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("ring_failure_detector_events_total{event=%q} not found", ev)
	return 0
}
