// Package balance chooses the endpoint for each request or connection the proxy sends to a
// service: power of two choices over peak-EWMA latency for HTTP requests (P2C), and least
// connections for opaque TCP (LeastConn). It is the pure core of the proxy's balancers: it
// starts no goroutines, does no I/O and never reads the clock; the caller passes `now`, and
// the random numbers come from Config.Rand, so a test with a seeded source and a synthetic
// clock is deterministic.
//
// # Peak-EWMA
//
// Every endpoint keeps an estimate of its round-trip time, as linkerd2-proxy (tower's
// PeakEwma, and Finagle before it) defines it:
//
//   - a new endpoint starts at Config.DefaultRTT (30 ms, floored at 1 ms);
//   - a sample larger than the current estimate replaces it at once (peak sensitivity), so one
//     slow response makes the endpoint expensive immediately;
//   - a smaller sample pulls the estimate toward it with the weight 1-exp(-elapsed/decay),
//     where elapsed is the time since the last sample and decay is Config.Decay (10 s);
//   - between samples the estimate decays toward zero with the same time constant, so an
//     endpoint that has not been tried for a while looks cheap again and gets probed.
//
// The cost of an endpoint is estimate * (pending+1) / weight, where pending is the number
// of requests started and not yet done and weight is the destination's WeightedAddr.weight
// (10000 when absent). Dividing the load by the weight is what tower-balance's Weighted
// wrapper did when linkerd2-proxy used it; linkerd2-proxy at 29637b6 keeps the weight in its
// endpoint metadata but no longer balances by it. Under load an endpoint with twice the
// weight carries about twice the requests; with no requests in flight the heavier of two
// equally fast endpoints wins every comparison.
//
// Pick draws two distinct endpoints at random and returns the cheaper one (ties go to
// either, at random). Linkerd's balancer records a failed request at a penalty (its
// response-aware estimator uses 5 s); Handle.Done(now, rtt, true) does the same with
// Config.FailurePenalty, so an endpoint that refuses connections quickly does not attract
// traffic by looking fast.
//
// # Least connections
//
// LeastConn returns the endpoint with the fewest open connections relative to its weight
// ((open+1)/weight), ties broken uniformly at random. A lease released with Failed keeps
// its endpoint out of the choice for Config.FailurePenalty while other endpoints are not
// failing.
//
// # Endpoint sets
//
// Reset replaces the whole set (the first Add of a discovery stream), Add adds or updates
// addresses and Remove drops them. An endpoint that stays keeps its load state (estimate,
// pending requests); its weight and value are updated. A removed endpoint is never returned
// by a Pick that starts after the update returned, even while requests started on it are
// still in flight; their handles stay valid and their Done is harmless.
//
// # Concurrency
//
// Every method is safe for concurrent use. Pick, Start, Acquire and the handles' Done and
// Release take no lock: the endpoint set is an immutable slice published by atomic pointer
// swap, pending counts are atomic, and each endpoint's (estimate, time) pair is a seqlock
// whose writers (Done) serialise on a per-endpoint mutex. Updates to the set serialise on a
// mutex and cost O(endpoints). Config.Rand must be safe for concurrent use when Pick is
// called concurrently; the default (nil) is math/rand/v2's global generator, which is.
//
// It imports the standard library only. It must not import shard, policy, identity's server
// package, injector, bench, cmd or any other Meridian package:
// `github.com/meridian-mesh/meridian/...`.
//
// Allowed imports: `std`.
package balance
