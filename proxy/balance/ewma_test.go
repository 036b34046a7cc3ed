package balance

import (
	"math"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"
)

// t0 is the synthetic clock's origin in every test.
var t0 = time.Unix(1_700_000_000, 0)

func addr(i int) netip.AddrPort {
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}), 8080)
}

func targets(n int) []Target[int] {
	ts := make([]Target[int], n)
	for i := range ts {
		ts[i] = Target[int]{Addr: addr(i), Value: i}
	}
	return ts
}

func seeded(seed uint64) Config {
	cfg := DefaultConfig()
	cfg.Rand = rand.NewPCG(seed, seed^0x5eed)
	return cfg
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-6*math.Max(math.Abs(a), math.Abs(b)) }

// TestEstimate walks one endpoint's peak-EWMA estimate through the rules of the package
// comment, step by step on a synthetic clock.
func TestEstimate(t *testing.T) {
	ms := float64(time.Millisecond)
	decay := float64(DefaultDecay)
	type step struct {
		at     time.Duration // since t0
		sample time.Duration // negative: no sample, only read the projection
		failed bool
		want   float64 // projected estimate at `at`, after the sample
	}
	cases := []struct {
		name  string
		cfg   Config
		steps []step
	}{
		{"seeded at the default RTT", DefaultConfig(), []step{{0, -1, false, 30 * ms}}},
		{"default RTT floored at 1ms", Config{DefaultRTT: time.Microsecond}, []step{{0, -1, false, 1 * ms}}},
		{"projection decays toward zero", DefaultConfig(), []step{
			{10 * time.Second, -1, false, 30 * ms * math.Exp(-1)},
		}},
		{"a larger sample replaces the estimate at once", DefaultConfig(), []step{
			{time.Second, 200 * time.Millisecond, false, 200 * ms},
		}},
		{"a smaller sample pulls toward it by elapsed time", DefaultConfig(), []step{
			{time.Second, 200 * time.Millisecond, false, 200 * ms},
			{11 * time.Second, 10 * time.Millisecond, false,
				200*ms*math.Exp(-10*float64(time.Second)/decay) + 10*ms*(1-math.Exp(-10*float64(time.Second)/decay))},
		}},
		{"samples at one rate converge to it", DefaultConfig(), func() []step {
			var s []step
			for i := 1; i <= 2000; i++ {
				s = append(s, step{time.Duration(i) * 100 * time.Millisecond, 5 * time.Millisecond, false, -1})
			}
			return append(s, step{2000 * 100 * time.Millisecond, -1, false, 5 * ms})
		}()},
		{"a failure records the penalty", DefaultConfig(), []step{
			{time.Second, time.Millisecond, true, float64(DefaultFailurePenalty)},
		}},
		{"a negative penalty records failures as samples", Config{FailurePenalty: -1}, []step{
			{time.Second, 50 * time.Millisecond, true, 50 * ms},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := NewP2C[int](tc.cfg, t0)
			p.Reset(targets(1), t0)
			e := p.Endpoints()[0]
			for i, s := range tc.steps {
				now := t0.Add(s.at)
				if s.sample >= 0 {
					p.Start(e).Done(now, s.sample, s.failed)
				}
				if got := e.load.projected(p.set.p.stamp(now)); s.want >= 0 && !near(got, s.want) {
					t.Fatalf("step %d: estimate %.0fns, want %.0fns", i, got, s.want)
				}
			}
			if e.Active() != 0 {
				t.Fatalf("%d requests still pending after every Done", e.Active())
			}
		})
	}
}

// TestCost checks that cost multiplies by pending+1 and divides by the weight.
func TestCost(t *testing.T) {
	p := NewP2C[int](DefaultConfig(), t0)
	p.Reset([]Target[int]{{Addr: addr(0)}, {Addr: addr(1), Weight: 20000}}, t0)
	a, b := p.Endpoints()[0], p.Endpoints()[1]
	if a.Weight() != DefaultWeight || b.Weight() != 20000 {
		t.Fatalf("weights %d, %d; want %d, 20000", a.Weight(), b.Weight(), DefaultWeight)
	}
	seed := float64(DefaultRTT)
	if got := a.load.cost(0); !near(got, seed/DefaultWeight) {
		t.Fatalf("idle cost %v, want %v", got, seed/DefaultWeight)
	}
	h1, h2 := p.Start(a), p.Start(a)
	if got := a.load.cost(0); !near(got, 3*seed/DefaultWeight) {
		t.Fatalf("cost with 2 pending %v, want %v", got, 3*seed/DefaultWeight)
	}
	if got := b.load.cost(0); !near(got, seed/20000) {
		t.Fatalf("cost at weight 20000 %v, want %v", got, seed/20000)
	}
	h1.Done(t0, 0, false)
	h2.Done(t0, 0, false)
	Handle{}.Done(t0, 0, false) // the zero handle is a no-op
	if a.Active() != 0 {
		t.Fatalf("pending %d after Done", a.Active())
	}
}

// TestPair checks that the two indexes are distinct, in range and about uniform.
func TestPair(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{2, 3, 7, 1000} {
		counts := make([]int, n)
		const draws = 200_000
		for range draws {
			a, b := pair(r.Uint64(), n)
			if a == b || a < 0 || b < 0 || a >= n || b >= n {
				t.Fatalf("n=%d: pair (%d, %d)", n, a, b)
			}
			counts[a]++
			counts[b]++
		}
		want := 2.0 * draws / float64(n)
		for i, c := range counts {
			if math.Abs(float64(c)-want) > 0.2*want+50 {
				t.Fatalf("n=%d: index %d drawn %d times, want about %.0f", n, i, c, want)
			}
		}
	}
}
