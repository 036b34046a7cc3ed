// Package shard is the destination replica: it takes Kubernetes objects from a source.Source,
// keeps the inputs of the services it owns, translates them (package translator) into
// snapshots (package snapshot), and serves Linkerd's io.linkerd.proxy.destination.Destination
// API (Get, GetProfile) from them.
//
// Inside, one type per job:
//   - Index (index.go) implements source.Handler (callbacks record and enqueue, never block)
//     and owns one worker pool that recomputes dirty services (publish.go). It keeps the
//     inputs of only what its ownership filter (SetOwns) admits, and publishes each port of
//     a service in every client view streams watch: a view is keyed by the client's node
//     (from the context token), and the views of one zone share one set (translator.View).
//     It keeps the ServiceProfiles of the services it owns, in every namespace (a client's
//     overrides the Service's). Of the whole cluster it keeps only what any replica may need
//     at once: the cluster IPs of Services (ipIndex), the zones of Nodes and the Servers of
//     every namespace (clusterState); of pod IPs, those it owns in the ring (ipKey). As a
//     source.PodFilter it wants only the pods its slices name and those whose address it
//     owns, and tells a source.PodLoader when a slice starts or stops naming one (refs.go).
//     notifier wakes the streams that wait on a key (an IP, a namespace's Servers, a
//     Service and its profiles).
//   - ServiceKey (key.go) names a service and carries its ring hash, computed once, so that
//     ownership checks neither build "namespace/name" nor hash it again (ring.OwnsHash).
//   - ownership (ownership.go) is the ring as streams follow it: an immutable view swapped
//     atomically, whose changed channel is closed on the next ring change. It also keeps
//     the relayed calls in flight (moveWatch) and cancels each one whose service a ring
//     change moves, or all of them when the replica stops, so that a relayed stream needs
//     no goroutine to watch the ring beside its blocking receive.
//   - follower (follow.go) applies each ring change: the index's filter first, a replay of
//     the source for the services gained, then the view (streams move), then the release of
//     what was lost.
//   - Server (server.go) is the gRPC service. Each stream is served in segments, each either
//     local (local.go: from the index's snapshots) or relayed (relay.go: one generic relay of
//     a server stream to the owner, shared by Get and GetProfile, cancelled by a ring change,
//     guarded against loops by ForwardedHeader; rawrelay.go: a relayed Get's updates pass
//     through as the owner encoded them, the relay recording only what a handover needs)
//     or refused with a redirect to the owner; a Get that moves receives only the
//     difference from what it holds. ServerOptions (codec.go) are the options of the
//     server the replica registers on. GetProfile builds
//     its profile from the Service and its ServiceProfile (profile.go); for an IP
//     (ipprofile.go), a cluster IP follows its service's owner (relayed by name), any other
//     address the replica that owns the address.
//   - Replica (replica.go) builds these from a Config and Deps (the source, an optional
//     Membership, the metrics registry, the logger, the credentials of relays: the
//     replica's mTLS, which accepts only an owner proving the destination identity) and
//     runs them: NewReplica, Register, Ready (a run.Readier), Run, RingHandler.
//
// It may import translator, snapshot, ring, shard/source, internal/* and the generated proxy
// API; it must not import `cmd/...`, `bench/...`, `policy/...`, `injector/...`, `proxy/...` or
// the identity server `identity`. Nothing below it may import shard.
package shard
