package balance

import (
	"errors"
	"math/rand/v2"
	"time"
)

// Linkerd's defaults.
const (
	// DefaultRTT is the round-trip time a new endpoint is assumed to have (linkerd2-proxy's
	// default_rtt).
	DefaultRTT = 30 * time.Millisecond
	// DefaultDecay is the time constant of the peak-EWMA estimate (linkerd2-proxy's decay).
	DefaultDecay = 10 * time.Second
	// DefaultFailurePenalty is the round-trip time recorded for a failed request, and how long
	// LeastConn passes over an endpoint whose connection failed (the penalty of linkerd2-proxy's
	// response-aware estimator).
	DefaultFailurePenalty = 5 * time.Second
	// DefaultWeight is the weight of an endpoint whose WeightedAddr.weight is 0 (unset); it is
	// the weight Linkerd's destination sends.
	DefaultWeight = 10000

	// minDuration floors DefaultRTT and Decay: a zero seed reads as no load, so P2C would
	// over-select a fresh endpoint, and a zero decay divides by zero.
	minDuration = time.Millisecond
)

// ErrNoEndpoints is returned by Pick when the set is empty: the caller fails the request
// fast (503 for HTTP, a refused connection for TCP).
var ErrNoEndpoints = errors.New("no endpoints")

// Config tunes a balancer. The zero value of a field means its default.
type Config struct {
	// DefaultRTT seeds the estimate of a new endpoint (P2C). Floored at 1 ms.
	DefaultRTT time.Duration
	// Decay is the peak-EWMA time constant (P2C). Floored at 1 ms.
	Decay time.Duration
	// FailurePenalty is the round-trip time Done records for a failed request (P2C), and how
	// long a failed endpoint is passed over (LeastConn). Negative disables it: failures are
	// then recorded like any other sample.
	FailurePenalty time.Duration
	// Rand supplies the random choices. It must be safe for concurrent use if Pick is called
	// concurrently. Nil means math/rand/v2's global generator.
	Rand rand.Source
}

// DefaultConfig returns Linkerd's settings: a default RTT of 30 ms, a decay of 10 s and a
// failure penalty of 5 s, with math/rand/v2's generator.
func DefaultConfig() Config {
	return Config{DefaultRTT: DefaultRTT, Decay: DefaultDecay, FailurePenalty: DefaultFailurePenalty}
}

// params is a Config resolved to the numbers the hot paths use. It never changes after
// construction.
type params struct {
	epoch     time.Time // the origin of every stamp, in nanoseconds
	seedNS    float64
	decayNS   float64
	penaltyNS float64 // 0 when disabled
	rand      rand.Source
}

// globalRand is math/rand/v2's goroutine-safe generator as a rand.Source.
type globalRand struct{}

func (globalRand) Uint64() uint64 { return rand.Uint64() }

func newParams(cfg Config, now time.Time) *params {
	def := DefaultConfig()
	if cfg.DefaultRTT == 0 {
		cfg.DefaultRTT = def.DefaultRTT
	}
	if cfg.Decay == 0 {
		cfg.Decay = def.Decay
	}
	if cfg.FailurePenalty == 0 {
		cfg.FailurePenalty = def.FailurePenalty
	}
	p := &params{
		epoch:   now,
		seedNS:  float64(max(cfg.DefaultRTT, minDuration)),
		decayNS: float64(max(cfg.Decay, minDuration)),
		rand:    cfg.Rand,
	}
	if cfg.FailurePenalty > 0 {
		p.penaltyNS = float64(cfg.FailurePenalty)
	}
	if p.rand == nil {
		p.rand = globalRand{}
	}
	return p
}

// stamp converts now to nanoseconds since the epoch (monotonic when both carry a monotonic
// reading; saturating like time.Time.Sub).
func (p *params) stamp(now time.Time) int64 { return int64(now.Sub(p.epoch)) }

// pair draws two distinct indexes below n (n >= 2) from one random number, by
// multiply-shift on its two halves.
func pair(r uint64, n int) (int, int) {
	a := int((r & 0xffffffff) * uint64(n) >> 32)
	b := int((r >> 32) * uint64(n-1) >> 32)
	if b >= a {
		b++
	}
	return a, b
}
