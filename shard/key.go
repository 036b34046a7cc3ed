package shard

import (
	"cmp"
	"fmt"
	"net/netip"
	"strings"

	"github.com/cespare/xxhash/v2"

	"github.com/meridian-mesh/meridian/ring"
)

// ServiceKey names a Service. It carries the hash that places the service in the ring
// (ring.ServiceHash of its namespace and name), computed once by NewServiceKey, so that an
// ownership check (one per slice and per stream event) neither builds "namespace/name" nor
// hashes it again.
//
// Make keys with NewServiceKey: the hash is part of the value, so a key built as a literal
// would compare unequal to the same service's key and look up the wrong owner.
type ServiceKey struct {
	Namespace, Name string
	hash            uint64
}

// NewServiceKey returns the key of the Service namespace/name.
func NewServiceKey(namespace, name string) ServiceKey {
	return ServiceKey{Namespace: namespace, Name: name, hash: ring.ServiceHash(namespace, name)}
}

// Hash returns ring.KeyHash(k.String()), the key's place in the ring.
func (k ServiceKey) Hash() uint64 { return k.hash }

// String returns "namespace/name".
func (k ServiceKey) String() string { return k.Namespace + "/" + k.Name }

// compareKeys orders keys by namespace, then name.
func compareKeys(a, b ServiceKey) int {
	return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
}

// ipHash places an IP address in the ring: the hash of its 16 bytes (an IPv4 address as
// IPv4-mapped). It does not allocate.
func ipHash(a netip.Addr) uint64 {
	b := a.Unmap().As16()
	return xxhash.Sum64(b[:])
}

// ipKey is the ring key of an IP address that is no Service's: the replica that owns it
// indexes the pods that have it and answers GetProfile for it. Its namespace is empty, so it
// is no service's key.
func ipKey(a netip.Addr) ServiceKey { return ServiceKey{Name: a.String(), hash: ipHash(a)} }

// ShardKey says what places a service in the ring. Every replica of a ring must use the same.
type ShardKey string

const (
	// ShardByService places each service by its "namespace/name" (ring.ServiceHash).
	ShardByService ShardKey = "service"
	// ShardByNamespace places every service of a namespace together, by the FNV-1a-64 hash of
	// the namespace's name (NamespaceHash): the hash of the API server's shardRange over
	// object.metadata.namespace, so that a replica's share is ranges of it
	// (ShardedListAndWatch) and the ring's partitions (contiguous ranges of the hash) map to
	// them. Namespaces whose names differ only at the end hash close together and tend to
	// share a partition, and so an owner.
	ShardByNamespace ShardKey = "namespace"
)

// ParseShardKey parses the --shard-key flag ("" is ShardByService).
func ParseShardKey(s string) (ShardKey, error) {
	switch ShardKey(s) {
	case "", ShardByService:
		return ShardByService, nil
	case ShardByNamespace:
		return ShardByNamespace, nil
	}
	return "", fmt.Errorf("shard key %q: want service or namespace", s)
}

// RingShape returns the ring shape the replicas of a ring placed by m build with (every
// replica of a ring uses the same key, and so the same shape). ShardByNamespace's shares
// are asked of the API server as ranges of the namespace hash, so its partitions are placed
// contiguously: ring.RangeHashConfig gives a replica about 64 runs of partitions, which a
// selector of maxShardRanges ranges covers exactly, where scattered partitions would widen
// into most of the cluster. ShardByService's shares are never asked for as ranges:
// ring.DefaultHashConfig.
func (m ShardKey) RingShape() ring.HashConfig {
	if m == ShardByNamespace {
		return ring.RangeHashConfig()
	}
	return ring.DefaultHashConfig()
}

// hash returns k's place in the ring under m. A key with no namespace (an address's, ipKey)
// is placed by its own hash in every mode. It does not allocate.
func (m ShardKey) hash(k ServiceKey) uint64 {
	if m == ShardByNamespace && k.Namespace != "" {
		return NamespaceHash(k.Namespace)
	}
	return k.hash
}

// NamespaceHash returns the FNV-1a-64 hash of a namespace's name, as the API server's
// shardRange computes it (k8s.io/apimachinery/pkg/sharding.HashField). It does not allocate.
func NamespaceHash(ns string) uint64 {
	const offset, prime = 14695981039346656037, 1099511628211
	h := uint64(offset)
	for i := 0; i < len(ns); i++ {
		h ^= uint64(ns[i])
		h *= prime
	}
	return h
}
