// Package shard is the destination replica: it takes Kubernetes objects from a source.Source,
// keeps the inputs of the services it owns, translates them (package translator) into
// snapshots (package snapshot), and serves Linkerd's io.linkerd.proxy.destination.Destination
// API (Get, GetProfile) from them.
//
// Inside, one type per job:
//   - Index (index.go) implements source.Handler (callbacks record and enqueue, never block)
//     and owns one worker pool that recomputes dirty services. It keeps only what its
//     ownership filter (SetOwns) admits.
//   - ServiceKey (key.go) names a service and carries its ring hash, computed once, so that
//     ownership checks neither build "namespace/name" nor hash it again (ring.OwnsHash).
//   - ownership (ownership.go) is the ring as streams follow it: an immutable view swapped
//     atomically, whose changed channel is closed on the next ring change.
//   - follower (follow.go) applies each ring change: the index's filter first, a replay of
//     the source for the services gained, then the view (streams move), then the release of
//     what was lost.
//   - Server (server.go) is the gRPC service. Each stream is served in segments, each either
//     local (local.go: from the index's snapshots) or relayed (relay.go: one generic relay of
//     a server stream to the owner, shared by Get and GetProfile, cancelled by a ring change,
//     guarded against loops by ForwardedHeader) or refused with a redirect to the owner;
//     a Get that moves receives only the difference from what it holds.
//   - Replica (replica.go) builds these from a Config and Deps (the source, an optional
//     Membership, the metrics registry, the logger, the credentials of relays: the
//     replica's mTLS, which accepts only an owner proving the destination identity) and
//     runs them: NewReplica, Register, Ready (a run.Readier), Run, RingHandler.
//
// It may import translator, snapshot, ring, shard/source, internal/* and the generated proxy
// API; it must not import `cmd/...`, `bench/...`, `policy/...`, `injector/...`, `proxy/...` or
// the identity server `identity`. Nothing below it may import shard.
package shard
