// Package discovery is the proxy's client of the Destination API: for each target authority
// the proxy sends traffic to, it keeps a GetProfile and a Get stream open on the destination
// service and turns them into a Snapshot (the endpoints with their identities, protocol hints
// and metric labels) that the balancers read without locks.
//
// It follows Meridian's redirect (FailedPrecondition with the meridian-owner trailer) to the
// replica that owns the service and talks to it directly after that, learning the owners of
// the services it uses; it works unchanged against a replica in forward mode and against any
// destination that speaks the proxy API. Three redirects in a row are followed at once, then
// with backoff; only a stream that delivered and stayed up for the longest backoff (5 s)
// starts the count afresh, so replicas that each serve and then redirect are not followed in
// a loop. While a stream is down it keeps the last snapshot and
// reconnects with backoff; the first Add of a new stream replaces the set. NoEndpoints empties
// it. InvalidArgument means the name is not a mesh name (ErrNotMeshName), and traffic then goes
// to the original address unproxied. A target no one holds is dropped after the idle timeout
// (5 s outbound, Linkerd's).
//
// Inside, one file per concept:
//   - endpoint.go: the pure part. WeightedAddr to Endpoint, and endpointSet, which applies a
//     stream's updates with Linkerd's semantics (the first update of a stream is its full
//     state; a Remove first is ignored) to an immutable sorted slice.
//   - target.go: one authority's shared state, published as an immutable Snapshot through an
//     atomic pointer with a channel closed on the next change; Target is a holder's handle.
//   - stream.go: the loop of one stream (Get or GetProfile): redirects, the owner cache,
//     backoff, and what each ending means.
//   - resolver.go: Resolver (Run, Resolve), the targets by authority with their reference
//     counts and idle drops, and the owners by service.
//   - config.go: Config, Conns (the caller's control-plane connections) and Pool, which
//     closes a connection no stream has used for PoolIdleTimeout.
//
// Concurrency: Resolve, Release and a Target's Snapshot and Changed are safe for concurrent
// use; Snapshot and Changed take no lock and do not allocate. Every stream goroutine (two per
// target) belongs to Resolver.Run and ends before it returns.
//
// It owns the streams' goroutines (Resolver.Run) and the per-target state. It imports the
// generated destination API, grpc, internal/destclient, internal/wire, internal/run,
// internal/quote, proxy/httpproxy (ParseAuthority) and zap; it must not import `shard/...`, `ring/...`,
// `snapshot/...`, `translator/...`, `policy/...`, `identity`, `injector/...`, `bench/...` or
// `cmd/...`.
package discovery
