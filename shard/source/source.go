package source

import (
	"context"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meridian-mesh/meridian/translator"
)

// Handler receives the objects a Source observes. Methods may be called concurrently from
// several goroutines (one per kind of object) and must not block: implementations record the
// object and hand work to their own goroutines. Objects passed in must not be modified by
// either side after the call.
type Handler interface {
	// OnService is called for an added or updated Service, or with deleted=true when it is gone.
	OnService(svc *corev1.Service, deleted bool)
	// OnEndpointSlice is called for an added, updated or deleted EndpointSlice, as its
	// projection. A slice is delivered as it is now: when its service-name label changes, an
	// update names the new service only, and a source that filters by service delivers a
	// slice moved to a service it does not admit as the deletion of a placeholder
	// (IsPlaceholder) naming that service.
	OnEndpointSlice(es *translator.EndpointSlice, deleted bool)
	// OnPod is called for an added, updated or deleted Pod.
	OnPod(pod *translator.Pod, deleted bool)
}

// NodeHandler is implemented by a Handler that wants Nodes, read as metadata only and
// projected (translator.ProjectNode: a Node's name and zone). A source that reads Nodes
// delivers them to a handler that implements it, under Handler's contract.
type NodeHandler interface {
	OnNode(node *metav1.PartialObjectMetadata, deleted bool)
}

// ServerHandler is implemented by a Handler that wants policy.linkerd.io Servers, as
// translator's projection (translator.Server; an invalid one has its Problem set). A source
// that reads Servers delivers them to a handler that implements it, under Handler's contract.
type ServerHandler interface {
	OnServer(s *translator.Server, deleted bool)
}

// ProfileHandler is implemented by a Handler that wants linkerd.io ServiceProfiles, as
// translator's projection (translator.ServiceProfile; an invalid one has its Problem set). A
// source that reads ServiceProfiles delivers them to a handler that implements it, under
// Handler's contract; a deletion may carry the profile's namespace and name only.
type ProfileHandler interface {
	OnServiceProfile(p *translator.ServiceProfile, deleted bool)
}

// ProfileFilter is implemented by a ProfileHandler that keeps some ServiceProfiles only (a
// replica keeps those of the services it owns). A source may ask it, from a profile's
// namespace and name, whether to read the rest, and skip the profile when the answer is no;
// a handler that starts wanting more must call Source.Replay afterwards. WantsProfile must
// be cheap and safe for concurrent use.
type ProfileFilter interface {
	WantsProfile(namespace, name string) bool
}

// deliver calls h's method for obj (a *corev1.Service, *translator.EndpointSlice,
// *translator.Pod, a Node's *metav1.PartialObjectMetadata, a *translator.Server or a
// *translator.ServiceProfile); it ignores
// objects of other types, and those of kinds h does not implement a method for.
func deliver(h Handler, obj any, deleted bool) {
	switch v := expandReduced(obj).(type) {
	case *corev1.Service:
		h.OnService(v, deleted)
	case *translator.EndpointSlice:
		h.OnEndpointSlice(v, deleted)
	case *translator.Pod:
		h.OnPod(v, deleted)
	case *metav1.PartialObjectMetadata:
		if nh, ok := h.(NodeHandler); ok {
			nh.OnNode(v, deleted)
		}
	case *translator.Server:
		if sh, ok := h.(ServerHandler); ok {
			sh.OnServer(v, deleted)
		}
	case *translator.ServiceProfile:
		if ph, ok := h.(ProfileHandler); ok {
			ph.OnServiceProfile(v, deleted)
		}
	}
}

// ServiceFilter is implemented by a Handler that keeps the EndpointSlices of some services
// only (a replica keeps those of the services it owns). A source may ask it, once it has read
// a slice's metadata, whether to decode the rest, and drop the slice when the answer is no:
// the handler would drop it anyway. Because a source may have dropped them, a handler that
// starts wanting more services must call Source.Replay afterwards (a replica does: it keeps
// nothing of the services it does not own). Services are always delivered, but
// of a Service it does not want a source may deliver the cluster IPs only (IsClusterIPsOnly);
// a handler that also implements PodFilter may be given only the pods it wants.
// WantsService must be cheap and safe for concurrent use.
type ServiceFilter interface {
	WantsService(namespace, name string) bool
}

// PodFilter is implemented by a Handler that needs some Pods only: a replica needs the pods
// the EndpointSlices it keeps name, and those whose address it owns in the ring (GetProfile by
// IP). A source may then keep nothing of a pod WantsPod refuses, and implements PodLoader:
// the handler calls WantPod when it starts needing a pod the source does not have (a slice
// names it), and ForgetPod when it stops. ips are the pod's addresses as translator.PodIPs
// gives them (translator.NetworkIPs). WantsPod must be cheap and safe for concurrent use.
type PodFilter interface {
	WantsPod(namespace, name string, ips []netip.Addr) bool
}

// PodLoader is implemented by a source that keeps only the pods its handler's PodFilter
// wants. Neither method blocks: both may be called from a Handler method.
type PodLoader interface {
	// WantPod says that the handler now needs pod namespace/name, which Source.Pod does not
	// have: the source reads it and delivers it (OnPod) if it exists.
	WantPod(namespace, name string)
	// ForgetPod says that the handler no longer needs pod namespace/name for its slices: the
	// source drops it from its cache unless the filter still wants it.
	ForgetPod(namespace, name string)
}

// ShareLoader is implemented by a source that keeps only what its handler's ServiceFilter
// admits (the Kubernetes source): when the handler starts wanting more services, Gain loads
// them rather than Replay delivering everything again, and when it wants fewer, Release lets
// its caches drop the rest. A replica's ring follower calls Gain (after the filter admits
// the gained services) before it releases the lost ones, and Release after.
type ShareLoader interface {
	// Gain reads and delivers the Services and EndpointSlices of the services the filter
	// admits now and before did not, the ServiceProfiles the handler wants, and, when it
	// keeps only the pods a PodFilter wants, those it wants now and the source does not
	// have; it returns when it has. It must not be called from a Handler method.
	Gain(ctx context.Context, g Gained) error
	// Release drops from the source's caches what the filter no longer admits (and the
	// pods the PodFilter no longer wants).
	Release()
}

// Gained describes what a handler gained, for ShareLoader.Gain.
type Gained struct {
	// Before is the filter as it was (ServiceFilter.WantsService before the change).
	Before func(namespace, service string) bool
	// ShardSelector, for a NamespaceSharder, selects (a superset of) the gained namespaces
	// on the API server ("" none: the list is of every namespace, filtered here).
	ShardSelector string
}

// NamespaceSharder is implemented by a ServiceFilter that admits services by their
// namespace's place in the FNV-1a-64 hash space, the hash the API server's shard selectors
// use (KEP-5866, the ShardedListAndWatch feature gate): a source may then ask the API server
// for the EndpointSlices of those namespaces only, with the selector ShardSelector returns,
// and filters what arrives as before (the selector may select more). When the API server
// does not echo the selector in shardInfo (the gate is off), the source stops sending it and
// filters on its side alone. ShardSelector must be cheap and safe for concurrent use; "" asks
// for every namespace. Services are read from every namespace either way (their cluster IPs
// are resolved on every replica).
type NamespaceSharder interface {
	ShardSelector() string
}

// Source delivers Services, EndpointSlices and Pods to a Handler, and, to a handler that
// implements NodeHandler or ServerHandler, the Nodes and Servers it reads.
type Source interface {
	// Run delivers the current objects and then every change to h until ctx ends. It returns
	// nil when ctx ends, or an error if the source cannot work at all.
	Run(ctx context.Context, h Handler) error
	// Synced reports whether the initial state has been delivered to the handler.
	// Safe for concurrent use.
	Synced() bool
	// Pod returns the current pod ns/name, or nil when unknown. The source keeps the pods, so
	// that a replica need not keep a second copy; it must be cheap (an index lookup) and safe
	// for concurrent use. The pod must not be modified.
	Pod(ns, name string) *translator.Pod
	// Replay delivers the current state of every object again to the handler given to Run
	// (as updates) and returns when it has. A replica calls it when it gains services on a
	// ring change, since it did not keep their objects before. It fails if Run is not running.
	Replay(ctx context.Context) error
}
