// Package feed serves a synthetic cluster (package gen) from the bench driver to destination
// replica processes over loopback HTTP, and is the replica's side of it: Source implements
// shard/source.Source.
//
// The wire is one long HTTP response per replica (GET /watch): a stream of frames, each a type
// byte, a uvarint length and a payload. Objects travel as Kubernetes protobuf (the API
// server's own encoding), so the replica gets real Services and EndpointSlices and nothing
// skips the translator. The stream starts with a Hello (the generator's Config, from which
// the replica synthesizes Pods on demand), then the whole state, a Synced marker, and then
// every change. POST /replay asks the server to re-send the whole state into the same
// ordered stream, followed by a ReplayDone marker carrying the caller's token; with a body (a
// bitmap of service indices), only the state of those services, after the changes queued
// before it was taken: Source.Gain asks for the services a ring change gave the replica, as
// the Kubernetes source lists only the gained share (source.ShareLoader).
//
// Server owns the one copy of the truth (a gen.Cluster) and one bounded frame queue per
// subscriber; when a subscriber's queue is full the server drops its queued frames and sends
// it the whole state instead (the frames dropped are all in that state), so a slow replica
// never blocks churn. Source keeps no copy of the cluster.
//
// It imports bench/gen, shard/source, translator, the Kubernetes API types, zap and the
// standard library; it must not import `shard` or `cmd/...`.
package feed
