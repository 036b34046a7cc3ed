// Package shard is the destination replica: it takes Kubernetes objects from a source.Source,
// keeps the inputs of the services it owns, translates them (package translator) into
// snapshots (package snapshot), and serves Linkerd's io.linkerd.proxy.destination.Destination
// API (Get, GetProfile) from them.
//
// Inside: Index implements source.Handler (callbacks record and enqueue, never block) and owns
// one worker pool that recomputes dirty services; Server is the gRPC service, one goroutine per
// stream reading its snapshot.Subscription; Replica wires a source, an index and a server and
// runs them.
//
// It may import translator, snapshot, ring, shard/source, internal/* and the generated proxy
// API; it must not import `cmd/...`, `bench/...`, `policy/...`, `injector/...`, `proxy/...` or
// the identity server `identity`. Nothing below it may import shard.
package shard
