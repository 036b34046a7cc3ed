// Package ring decides which destination replica owns which service, and keeps the set of
// replicas current with gossip.
//
// The core is pure: Build turns a set of members into an immutable Ring, and
// (*Ring).Owner maps a service key ("namespace/name") to its owner without locks or
// allocation; OwnerOfHash and OwnsHash do the same from the key's hash (KeyHash, or
// ServiceHash for a namespace and name), for callers that keep it. Keys hash with xxhash
// into a fixed number of partitions; partitions are assigned by consistent hashing over
// virtual nodes with a bounded-load rule, so no member owns more than 1.02x its fair share
// (the default shape) and a join or leave moves close to the minimal 1/N of the keys.
// Every replica computes the same Ring from the same members and shape (HashConfig); a
// shape can place partitions contiguously, so that a member's share is a few ranges of key
// hashes.
//
// Around the core, Cluster is a thin hashicorp/memberlist layer: it joins the gossip cluster
// (seeds by address or DNS name, joined again whenever one is not a member, so split rings
// merge), carries each replica's gRPC address and ring shape in its node metadata (members
// that do not all advertise one shape build LegacyHashConfig rings, which every version
// computes), rebuilds the Ring on every membership change and publishes it with an atomic
// swap, and notifies subscribers. Gossip is encrypted and authenticated by a keyring (a
// primary key and accepted keys; SetGossipKeys changes it while the member runs, for a
// rotation), and binds the gRPC address's host, not every interface, by default; plaintext
// gossip must be asked for (InsecureGossip). Loading keys from files and following them is
// ring/gossipkey's.
//
// The package owns the gossip listener and the memberlist goroutines (stopped when
// Cluster.Run returns). It imports only memberlist, xxhash, the Prometheus client, zap and
// the standard library; it must not import a Meridian package, gRPC or Kubernetes:
// `github.com/meridian-mesh/meridian/...`, `google.golang.org/grpc/...`, `k8s.io/...`.
//
// Allowed imports: `std`, `github.com/hashicorp/memberlist`, `github.com/cespare/xxhash/v2`,
// `github.com/prometheus/client_golang/prometheus/...`, `go.uber.org/zap/...`.
package ring
