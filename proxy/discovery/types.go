package discovery

import (
	"errors"
	"net/netip"
)

// Hint is an endpoint's protocol hint.
type Hint uint8

const (
	HintNone   Hint = iota // no hint: detect
	HintH2                 // the peer proxy accepts HTTP/2 (meshed)
	HintOpaque             // the port is opaque: proxy it as TCP
)

// Endpoint is one address of a target, as discovery gave it. Values are immutable once in a
// Snapshot.
type Endpoint struct {
	Addr   netip.AddrPort
	Weight uint32 // 10000 by default
	// Identity is the peer proxy's TLS identity; empty when the endpoint is not meshed (no
	// mTLS: connect in plaintext).
	Identity string
	Hint     Hint
	// OpaqueTransportPort, when not 0, is the peer proxy's inbound port: connect there with
	// TLS ALPN transport.l5d.io/v1 and the transport header naming Addr's port.
	OpaqueTransportPort uint16
	// Labels are the metric labels of the endpoint: the set's labels (service, namespace)
	// merged with its own (pod, serviceaccount, deployment, ...). Shared; do not modify.
	Labels map[string]string
}

// Snapshot is the state of one target at one moment. Values are immutable: a change produces
// a new Snapshot.
type Snapshot struct {
	// Version increases with every change of the target's state.
	Version uint64
	// Resolved is false until the first answer of the Get stream (for an IP address, of the
	// profile stream).
	Resolved bool
	// Exists is false for a service the destination says does not exist.
	Exists bool
	// Endpoints are sorted by address; empty when there are none (requests fail fast). An IP
	// address's target has one: the endpoint its profile names, or the bare address.
	Endpoints []Endpoint
	// Profile is the target's latest profile (zero before the first).
	Profile Profile
}

// Profile is what GetProfile says of a target.
type Profile struct {
	// FullyQualifiedName is the service's name (web.shop.svc.cluster.local).
	FullyQualifiedName string
	// Opaque says the port is opaque: proxy TCP without protocol detection.
	Opaque bool
	// Endpoint is set when the target is one endpoint (a pod DNS name or IP).
	Endpoint *Endpoint
}

// ErrNotMeshName means the destination refused the name (InvalidArgument: not a cluster
// name, an ExternalName service; for an IP address, a destination that does not look
// addresses up): send traffic to it directly.
var ErrNotMeshName = errors.New("discovery: not a mesh name")
