package balance

import (
	"errors"
	"net/netip"
	"testing"
	"time"
)

func TestLeastConnPicksFewestOpen(t *testing.T) {
	c := NewLeastConn[int](seeded(10), t0)
	if _, err := c.Pick(t0); !errors.Is(err, ErrNoEndpoints) {
		t.Fatalf("empty: %v, want ErrNoEndpoints", err)
	}
	c.Reset(targets(3), t0)
	eps := c.Endpoints()
	// Open 2 on the first, 1 on the second: the third (0 open) must win every time.
	leases := []Lease{c.Acquire(eps[0]), c.Acquire(eps[0]), c.Acquire(eps[1])}
	for range 100 {
		if e, _ := c.Pick(t0); e != eps[2] {
			t.Fatalf("picked %v with %d open; want %v with 0", e.Addr(), e.Active(), eps[2].Addr())
		}
	}
	// Now the second and third tie at one open each; the first has two.
	leases = append(leases, c.Acquire(eps[2]))
	counts := map[*Endpoint[int]]int{}
	for range 10_000 {
		e, _ := c.Pick(t0)
		counts[e]++
	}
	if counts[eps[0]] != 0 || counts[eps[1]] < 4000 || counts[eps[2]] < 4000 {
		t.Fatalf("tie between two endpoints split %d/%d (and %d to the busier one); want about even",
			counts[eps[1]], counts[eps[2]], counts[eps[0]])
	}
	for _, l := range leases {
		l.Release()
	}
	Lease{}.Release()
	Lease{}.Failed(t0)
	for _, e := range eps {
		if e.Active() != 0 {
			t.Fatalf("%v still counts %d open", e.Addr(), e.Active())
		}
	}
}

// TestLeastConnTiesAreUniform checks the reservoir tie-break over non-adjacent ties.
func TestLeastConnTiesAreUniform(t *testing.T) {
	c := NewLeastConn[int](seeded(11), t0)
	c.Reset(targets(10), t0)
	eps := c.Endpoints()
	for i, e := range eps {
		if i != 0 && i != 1 && i != 7 {
			c.Acquire(e) // never released: only 0, 1 and 7 stay idle
		}
	}
	counts := map[int]int{}
	const picks = 30_000
	for range picks {
		e, _ := c.Pick(t0)
		counts[e.Value()]++
	}
	for _, i := range []int{0, 1, 7} {
		if counts[i] < picks/3-1500 || counts[i] > picks/3+1500 {
			t.Fatalf("tie counts %v; want about %d each for 0, 1 and 7", counts, picks/3)
		}
	}
}

func TestLeastConnWeights(t *testing.T) {
	c := NewLeastConn[int](seeded(12), t0)
	ts := targets(2)
	ts[1].Weight = 3 * DefaultWeight
	c.Reset(ts, t0)
	// Open connections without closing them: the open counts settle in proportion to the
	// weights ((open+1)/weight stays level).
	for range 400 {
		e, _ := c.Pick(t0)
		c.Acquire(e)
	}
	light, heavy := c.Endpoints()[0].Active(), c.Endpoints()[1].Active()
	if r := float64(heavy) / float64(light); r < 2.7 || r > 3.3 {
		t.Fatalf("open %d (weight 1) vs %d (weight 3): ratio %.2f, want about 3", light, heavy, r)
	}
}

func TestLeastConnFailedEndpointIsPassedOver(t *testing.T) {
	c := NewLeastConn[int](seeded(13), t0)
	c.Reset(targets(2), t0)
	bad, good := c.Endpoints()[0], c.Endpoints()[1]
	c.Acquire(bad).Failed(t0)
	busy := c.Acquire(good) // good is busier, but bad is failing
	for _, at := range []time.Duration{0, DefaultFailurePenalty - time.Millisecond} {
		if e, _ := c.Pick(t0.Add(at)); e != good {
			t.Fatalf("at +%v picked the failing endpoint", at)
		}
	}
	if e, _ := c.Pick(t0.Add(DefaultFailurePenalty)); e != bad {
		t.Fatalf("after the penalty the idle endpoint must be picked again, got %v", e.Addr())
	}
	// When every endpoint is failing, the least loaded of them is still returned.
	c.Acquire(good).Failed(t0)
	if e, _ := c.Pick(t0); e != bad {
		t.Fatalf("all failing: picked %v, want the idle %v", e.Addr(), bad.Addr())
	}
	busy.Release()
}

func TestLeastConnRemovedIsNeverPicked(t *testing.T) {
	c := NewLeastConn[int](seeded(14), t0)
	c.Reset(targets(3), t0)
	gone := c.Endpoints()[0] // the least loaded: it would win every pick
	open := c.Acquire(gone)
	for _, e := range c.Endpoints()[1:] {
		c.Acquire(e)
		c.Acquire(e)
	}
	c.Remove([]netip.AddrPort{gone.Addr()})
	for range 1000 {
		if e, _ := c.Pick(t0); e == gone {
			t.Fatal("picked a removed endpoint")
		}
	}
	open.Release()
	if !gone.Removed() || gone.Active() != 0 {
		t.Fatalf("removed endpoint: removed=%v open=%d", gone.Removed(), gone.Active())
	}
}
