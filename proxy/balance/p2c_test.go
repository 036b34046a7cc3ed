package balance

import (
	"container/heap"
	"errors"
	"math/rand/v2"
	"net/netip"
	"sync"
	"testing"
	"time"
)

// completion is a simulated request that ends at `at`.
type completion struct {
	at  time.Time
	rtt time.Duration
	h   Handle
}

type completions []completion

func (c completions) Len() int           { return len(c) }
func (c completions) Less(i, j int) bool { return c[i].at.Before(c[j].at) }
func (c completions) Swap(i, j int)      { c[i], c[j] = c[j], c[i] }
func (c *completions) Push(x any)        { *c = append(*c, x.(completion)) }
func (c *completions) Pop() any {
	old := *c
	x := old[len(old)-1]
	*c = old[:len(old)-1]
	return x
}

// simulate runs a closed loop of `clients` concurrent clients against p on a synthetic
// clock: each picks, holds the request for its endpoint's latency (±10% jitter) and then
// sends the next one, `requests` in all. It returns the picks per address.
func simulate(t *testing.T, p *P2C[int], latency map[netip.AddrPort]time.Duration, clients, requests int) map[netip.AddrPort]int {
	t.Helper()
	jitter := rand.New(rand.NewPCG(7, 7))
	picks := map[netip.AddrPort]int{}
	q := &completions{}
	send := func(now time.Time) {
		e, err := p.Pick(now)
		if err != nil {
			t.Fatalf("pick: %v", err)
		}
		picks[e.Addr()]++
		rtt := time.Duration(float64(latency[e.Addr()]) * (0.9 + 0.2*jitter.Float64()))
		heap.Push(q, completion{at: now.Add(rtt), rtt: rtt, h: p.Start(e)})
	}
	for i := range clients {
		send(t0.Add(time.Duration(i) * 100 * time.Microsecond))
	}
	for sent := clients; q.Len() > 0; {
		c := heap.Pop(q).(completion)
		c.h.Done(c.at, c.rtt, false)
		if sent < requests {
			send(c.at)
			sent++
		}
	}
	return picks
}

func TestP2CSlowEndpointGetsFewerPicks(t *testing.T) {
	for _, clients := range []int{1, 10} {
		p := NewP2C[int](seeded(1), t0)
		p.Reset(targets(4), t0)
		latency := map[netip.AddrPort]time.Duration{}
		for i := range 4 {
			latency[addr(i)] = 10 * time.Millisecond
		}
		slow := addr(2)
		latency[slow] = 50 * time.Millisecond
		const requests = 20_000
		picks := simulate(t, p, latency, clients, requests)
		t.Logf("%d clients: picks %v", clients, picks)
		// A fair share is 25%; the slow endpoint must get clearly less, each fast one more.
		if picks[slow] > requests/10 {
			t.Errorf("%d clients: slow endpoint got %d of %d picks, want under 10%%", clients, picks[slow], requests)
		}
		for a, n := range picks {
			if a != slow && n < requests/4 {
				t.Errorf("%d clients: fast endpoint %v got %d of %d picks, want over 25%%", clients, a, n, requests)
			}
		}
	}
}

func TestP2CWeights(t *testing.T) {
	p := NewP2C[int](seeded(2), t0)
	ts := targets(3)
	ts[2].Weight = 2 * DefaultWeight
	p.Reset(ts, t0)
	latency := map[netip.AddrPort]time.Duration{}
	for _, tg := range ts {
		latency[tg.Addr] = 10 * time.Millisecond
	}
	picks := simulate(t, p, latency, 30, 30_000)
	t.Logf("picks %v", picks)
	// Under load, twice the weight carries about twice the requests of each other endpoint.
	for _, light := range []netip.AddrPort{addr(0), addr(1)} {
		ratio := float64(picks[addr(2)]) / float64(picks[light])
		if ratio < 1.5 || ratio > 3 {
			t.Errorf("heavy/light picks %d/%d = %.2f, want about 2 (1.5..3)", picks[addr(2)], picks[light], ratio)
		}
	}
}

func TestP2CNoEndpointsAndOne(t *testing.T) {
	p := NewP2C[int](seeded(3), t0)
	if e, err := p.Pick(t0); !errors.Is(err, ErrNoEndpoints) || e != nil {
		t.Fatalf("empty set: Pick = %v, %v; want nil, ErrNoEndpoints", e, err)
	}
	p.Reset(targets(1), t0)
	for range 10 {
		e, err := p.Pick(t0)
		if err != nil || e.Addr() != addr(0) || e.Value() != 0 {
			t.Fatalf("one endpoint: Pick = %v, %v", e, err)
		}
	}
	p.Reset(nil, t0)
	if _, err := p.Pick(t0); !errors.Is(err, ErrNoEndpoints) {
		t.Fatalf("after Reset(nil): %v, want ErrNoEndpoints", err)
	}
}

func TestP2CRemovedEndpointIsNeverPicked(t *testing.T) {
	for _, how := range []string{"Remove", "Reset"} {
		t.Run(how, func(t *testing.T) {
			p := NewP2C[int](seeded(4), t0)
			p.Reset(targets(3), t0)
			var gone *Endpoint[int]
			for _, e := range p.Endpoints() {
				if e.Addr() == addr(1) {
					gone = e
				}
			}
			inflight := p.Start(gone) // a request still running when the endpoint goes away
			if how == "Remove" {
				p.Remove([]netip.AddrPort{addr(1), addr(99)})
			} else {
				p.Reset([]Target[int]{targets(3)[0], targets(3)[2]}, t0)
			}
			if !gone.Removed() || len(p.Endpoints()) != 2 {
				t.Fatalf("after %s: removed=%v, %d endpoints", how, gone.Removed(), len(p.Endpoints()))
			}
			now := t0
			for i := range 5000 {
				now = now.Add(time.Millisecond)
				e, err := p.Pick(now)
				if err != nil {
					t.Fatal(err)
				}
				if e.Addr() == addr(1) {
					t.Fatalf("pick %d returned the removed endpoint", i)
				}
				p.Start(e).Done(now, time.Millisecond, false)
			}
			inflight.Done(now, time.Second, false) // harmless on a removed endpoint
			if gone.Active() != 0 {
				t.Fatalf("removed endpoint still counts %d pending", gone.Active())
			}
		})
	}
}

func TestP2CUpdatesKeepLoadState(t *testing.T) {
	p := NewP2C[string](seeded(5), t0)
	a := netip.MustParseAddrPort("10.0.0.1:80")
	b := netip.MustParseAddrPort("10.0.0.2:80")
	p.Reset([]Target[string]{{Addr: a, Value: "a1"}}, t0)
	ea := p.Endpoints()[0]
	h := p.Start(ea)
	p.Start(ea).Done(t0.Add(time.Second), 400*time.Millisecond, false)

	p.Add([]Target[string]{{Addr: b, Value: "b"}, {Addr: a, Value: "a2", Weight: 5}}, t0.Add(time.Second))
	p.Reset([]Target[string]{{Addr: b, Value: "b"}, {Addr: a, Value: "a3", Weight: 7}}, t0.Add(time.Second))
	eps := p.Endpoints()
	if len(eps) != 2 || eps[1] != ea {
		t.Fatalf("endpoints %v: the kept address must be the same *Endpoint", eps)
	}
	if ea.Value() != "a3" || ea.Weight() != 7 || ea.Active() != 1 || ea.Removed() {
		t.Fatalf("kept endpoint: value %q weight %d active %d removed %v; want a3, 7, 1, false",
			ea.Value(), ea.Weight(), ea.Active(), ea.Removed())
	}
	if got := ea.load.projected(p.set.p.stamp(t0.Add(time.Second))); !near(got, float64(400*time.Millisecond)) {
		t.Fatalf("kept estimate %v, want 400ms", time.Duration(got))
	}
	h.Done(t0.Add(time.Second), 0, false)
}

// TestP2CConcurrent runs pickers against set updates; with -race it checks the lock-free
// paths, and at the end no request may be left pending.
func TestP2CConcurrent(t *testing.T) {
	p := NewP2C[int](DefaultConfig(), t0)
	p.Reset(targets(8), t0)
	var pickers, updater sync.WaitGroup
	stop := make(chan struct{})
	updater.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			switch i % 3 {
			case 0:
				p.Remove([]netip.AddrPort{addr(i % 8)})
			case 1:
				p.Add(targets(8)[i%8:i%8+1], t0)
			default:
				p.Reset(targets(1+i%8), t0)
			}
		}
	})
	seen := make([]map[*Endpoint[int]]bool, 4)
	for g := range seen {
		seen[g] = map[*Endpoint[int]]bool{}
		pickers.Go(func() {
			now := t0
			for i := range 20_000 {
				now = now.Add(time.Microsecond)
				e, err := p.Pick(now)
				if err != nil {
					continue // the updater may have emptied the set for a moment
				}
				seen[g][e] = true
				p.Start(e).Done(now, time.Duration(g*i%50)*time.Millisecond, i%17 == 0)
			}
		})
	}
	pickers.Wait()
	close(stop)
	updater.Wait()
	for _, m := range seen {
		for e := range m {
			if e.Active() != 0 {
				t.Fatalf("%v has %d pending after every Done", e.Addr(), e.Active())
			}
		}
	}
}
