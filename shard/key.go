package shard

import (
	"cmp"
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
