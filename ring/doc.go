// Package ring decides which destination replica owns which service, and keeps the set of
// replicas current with gossip.
//
// The core is pure: Build turns a set of members into an immutable Ring, and
// (*Ring).Owner maps a service key ("namespace/name") to its owner without locks or
// allocation; OwnerOfHash and OwnsHash do the same from the key's hash (KeyHash, or
// ServiceHash for a namespace and name), for callers that keep it. Keys hash with xxhash into a fixed number of partitions; partitions are
// assigned by consistent hashing over virtual nodes with a bounded-load rule, so no member
// owns more than about 1.25x its fair share and a join or leave moves close to the minimal
// 1/N of the keys. Every replica computes the same Ring from the same members.
//
// Around the core, Cluster is a thin hashicorp/memberlist layer: it joins the gossip
// cluster (seeds by address or DNS name, optional encryption key), carries each replica's
// gRPC address in its node metadata, rebuilds the Ring on every membership change and
// publishes it with an atomic swap, and notifies subscribers.
//
// The package owns the gossip listener and the memberlist goroutines (stopped when
// Cluster.Run returns). It imports only memberlist, xxhash, the Prometheus client, zap and
// the standard library; it must not import a Meridian package, gRPC or Kubernetes:
// `github.com/meridian-mesh/meridian/...`, `google.golang.org/grpc/...`, `k8s.io/...`.
//
// Allowed imports: `std`, `github.com/hashicorp/memberlist`, `github.com/cespare/xxhash/v2`,
// `github.com/prometheus/client_golang/prometheus/...`, `go.uber.org/zap/...`.
package ring
