// Package discovery is the proxy's client of the Destination API: for each target authority
// the proxy sends traffic to, it keeps a GetProfile and a Get stream open on the destination
// service and turns them into a Snapshot (the endpoints with their identities, protocol hints
// and metric labels) that the balancers read without locks.
//
// It follows Meridian's redirect (FailedPrecondition with the meridian-owner trailer) to the
// replica that owns the service and talks to it directly after that, learning the owners of
// the services it uses; it works unchanged against a replica in forward mode and against any
// destination that speaks the proxy API. While a stream is down it keeps the last snapshot and
// reconnects with backoff; the first Add of a new stream replaces the set. NoEndpoints empties
// it. InvalidArgument means the name is not a mesh name (ErrNotMeshName), and traffic then goes
// to the original address unproxied. A target no one holds is dropped after the idle timeout
// (5 s outbound, Linkerd's).
//
// It owns the streams' goroutines (Resolver.Run) and the per-target state. It imports the
// generated destination API, grpc, internal/destclient, internal/wire and zap; it must not
// import `shard/...`, `policy/...`, `identity`, `injector/...`, `bench/...` or `cmd/...`.
package discovery
