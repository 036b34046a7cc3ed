// Package gossipkey reads a destination replica's gossip keys from files and installs them
// in its running ring when the files change, so that keys rotate without a restart.
//
// Two layouts (Files): one file holding the primary key (--gossip-key-file), or a directory
// (--gossip-keys-dir) holding gossip.key, the primary key, and any number of other *.key
// files, the accepted keys: the layout of a Kubernetes Secret mounted whole, such as the
// chart's linkerd-dst-gossip-key with keys gossip.key and accepted-*.key. Hidden entries
// (a Secret volume's ..data links) and other names are ignored. Every key is 16, 24 or 32
// bytes, raw or base64 (ring.ParseGossipKey).
//
// Load reads the keys once. A Reloader follows the files (internal/filewatch) and, when
// they hold a different set, installs it with ring.Cluster.SetGossipKeys; a set that does
// not load (a missing primary, a bad key, an unreadable file) is refused with a warning, an
// entry in Warnings and ring_gossip_key_reload_errors_total, and the current keys stay.
//
// It owns the Reloader's file watch. It imports ring, internal/filewatch, zap, Prometheus
// and the standard library; it must not import shard, cmd, gRPC or Kubernetes:
// `github.com/meridian-mesh/meridian/shard/...`, `github.com/meridian-mesh/meridian/cmd/...`,
// `google.golang.org/grpc/...`, `k8s.io/...`.
//
// Allowed imports: `std`, `github.com/meridian-mesh/meridian/ring`,
// `github.com/meridian-mesh/meridian/internal/filewatch`,
// `github.com/prometheus/client_golang/prometheus/...`, `go.uber.org/zap/...`.
package gossipkey
