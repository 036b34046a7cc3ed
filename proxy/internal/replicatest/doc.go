// Package replicatest is test-only: the destination replicas that the data plane's tests
// resolve against (proxy/discovery's and proxy/e2e's), in process on loopback. Start runs a
// shard replica on a directory of Kubernetes YAML, serving gRPC, alone or in a memberlist
// ring; WaitRing waits until a ring agrees, Owner finds a service's owner, Kill crashes a
// replica, GetStreams counts the Get streams it serves.
//
// It owns nothing beyond a test: every replica stops and is waited for when its test ends.
// It imports internal/testutil, internal/grpcserver, proxy/internal/proxytest, ring, shard,
// shard/source, zap and the Prometheus client; it must not import `proxy`,
// `proxy/discovery/...`, `proxy/inbound/...`, `proxy/outbound/...`, `bench/...` or `cmd/...`
// (the packages whose tests use it, and the binaries).
package replicatest
