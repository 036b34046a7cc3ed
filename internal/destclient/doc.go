// Package destclient is the client side of Linkerd's Destination API that Meridian's own
// tools share (the endpoints CLI, the bench harness, tests): View applies a Get stream's
// updates to the set of addresses a proxy would hold.
//
// Held is the compact form a relaying replica keeps per stream: address plus a fingerprint,
// 14 bytes an IPv4 address (27 any other), in sorted arrays. MergeSorted and DedupeLast are
// how a client merges an Add into a sorted set (Held's arrays, the proxy's endpoint sets).
//
// It imports the generated API, protobuf, internal/wire and the standard library only; it
// must not import `shard/...`, `snapshot`, `translator`, `ring`, `policy/...`, `identity/...`,
// `injector/...`, `bench/...`, `proxy/...` or `cmd/...`.
package destclient
