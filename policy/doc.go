// Package policy is Meridian's policy controller: it watches Pods and Linkerd's
// policy.linkerd.io resources (Server, AuthorizationPolicy, MeshTLSAuthentication,
// NetworkAuthentication, ServerAuthorization), keeps them in an Index, and serves each pod
// port's inbound policy over io.linkerd.proxy.inbound.InboundServerPolicies (GetPort,
// WatchPort) as Linkerd's policy controller does, so unmodified Linkerd proxies work.
//
// Layers, outermost first:
//
//   - Run wires a Source, the Index, the gRPC Server and the admin server; it blocks until
//     its context ends.
//   - A Source (KubeSource: client-go informers, typed for Pods and dynamic for the policy
//     CRDs; DirSource: a directory of YAML manifests followed by internal/manifest) feeds
//     converted objects (package policy/api) into the Index. Source callbacks never block.
//     Neither widens a policy on bad input: an object that fails conversion, or a file that
//     does not parse, leaves its last good version in effect.
//   - The Index holds the current objects and, per WatchPort stream, a one-slot wake-up
//     channel; a change wakes only the streams it may affect (a pod's own streams, its
//     namespace's streams for Servers and authorizations, every stream for authentications).
//   - Each stream recomputes its policy with package policy/compute (pure) when woken and
//     sends it only if it differs (proto.Equal) from what it last sent. Per-stream state is
//     bounded: the last message sent and one pending wake-up; bursts of changes coalesce.
//
// It imports policy/api, policy/compute, policy/workload, internal/* and client-go; it must
// not import other Meridian server packages: `shard/...`, `identity/...`, `injector/...`,
// `proxy/...`, `bench/...`, `cmd/...`.
package policy
