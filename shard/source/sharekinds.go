package source

import (
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/meridian-mesh/meridian/translator"
)

// AnnotationClusterIPsOnly marks a Service of which a filtering source kept only its name and
// cluster IPs, because the handler does not want the service (ServiceFilter): every replica
// resolves every cluster IP (GetProfile by IP), but only the owner reads the rest. A handler
// must not take such a Service for the whole object (IsClusterIPsOnly).
const AnnotationClusterIPsOnly = "meridian.io/cluster-ips-only"

// AnnotationDropped marks the placeholder a filtering source deletes from its cache when an
// object it does not want changes. Handlers see only a slice's, as a deletion
// (IsPlaceholder).
const AnnotationDropped = "meridian.io/dropped"

// clusterIPsOnly and dropped are the annotations of every reduced object (shared: objects
// passed to handlers are not modified).
var (
	clusterIPsOnly = map[string]string{AnnotationClusterIPsOnly: "true"}
	dropped        = map[string]string{AnnotationDropped: "true"}
)

// IsClusterIPsOnly reports whether svc is the reduced form of a Service the handler does not
// want: its name, namespace, resourceVersion and cluster IPs, nothing else.
func IsClusterIPsOnly(svc *corev1.Service) bool {
	return svc != nil && svc.Annotations[AnnotationClusterIPsOnly] != ""
}

// isReduced reports whether obj is a reduced Service (as read, IsClusterIPsOnly, or as kept,
// serviceIPs) or a placeholder, which the informers' transform does not reduce again.
func isReduced(obj any) bool {
	if _, ok := obj.(*serviceIPs); ok {
		return true
	}
	m, ok := obj.(metav1.Object)
	if !ok {
		return false
	}
	a := m.GetAnnotations()
	return a[AnnotationClusterIPsOnly] != "" || a[AnnotationDropped] != ""
}

// IsPlaceholder reports whether es, delivered as a deletion, is the placeholder of a slice
// that a filtering source read when the handler did not want its service (es.Service, which
// its label names now). The handler may hold the slice from when its label named another
// service, and then lets it go there; the same service means the ring moved it, which the
// handler follows by itself.
func IsPlaceholder(es *translator.EndpointSlice) bool { return isDropped(es) }

// isDropped reports whether obj is the placeholder of an unwanted object.
func isDropped(obj any) bool {
	m, ok := obj.(metav1.Object)
	return ok && m.GetAnnotations()[AnnotationDropped] != ""
}

// clusterIPsOf is the reduced Service (IsClusterIPsOnly) of the Service m with these cluster
// IPs.
func clusterIPsOf(m objMeta, ip string, ips []string) *corev1.Service {
	return &corev1.Service{ObjectMeta: reducedMeta(m, clusterIPsOnly), Spec: corev1.ServiceSpec{ClusterIP: ip, ClusterIPs: ips}}
}

// serviceIPs is what a Services cache keeps of a Service the handler does not want: the
// reduced Service (clusterIPsOf) in about a sixth of its memory. A replica keeps one for every
// Service of the cluster it does not own; as a corev1.Service (592 bytes of struct, before its
// strings) those were the largest part of a small shard's fixed cost. The cache's handlers are
// given the reduced Service it stands for (expandReduced); the informer keys it through
// GetObjectMeta.
type serviceIPs struct {
	namespace, name, resourceVersion string
	clusterIP                        string
	clusterIPs                       []string // nil: [clusterIP], the single-stack case
}

// compactIPs is what the cache keeps of the Service m with these cluster IPs.
func compactIPs(m objMeta, ip string, ips []string) *serviceIPs {
	c := &serviceIPs{namespace: m.namespace, name: m.name, resourceVersion: m.resourceVersion, clusterIP: ip, clusterIPs: ips}
	if len(ips) == 1 && ips[0] == ip {
		c.clusterIPs = nil
	}
	return c
}

// GetObjectMeta implements metav1.ObjectMetaAccessor: the informer's key function and the
// handlers' resourceVersion comparisons read it.
func (c *serviceIPs) GetObjectMeta() metav1.Object {
	return &metav1.ObjectMeta{Namespace: c.namespace, Name: c.name, ResourceVersion: c.resourceVersion}
}

// service is the reduced Service (IsClusterIPsOnly) c stands for.
func (c *serviceIPs) service() *corev1.Service {
	ips := c.clusterIPs
	if ips == nil && c.clusterIP != "" {
		ips = []string{c.clusterIP}
	}
	return clusterIPsOf(objMeta{name: c.name, namespace: c.namespace, resourceVersion: c.resourceVersion}, c.clusterIP, ips)
}

// compactReduced returns what the cache keeps of obj: a reduced Service becomes its
// serviceIPs; anything else is kept as it is.
func compactReduced(obj any) any {
	if svc, ok := obj.(*corev1.Service); ok && IsClusterIPsOnly(svc) {
		return compactIPs(objMeta{name: svc.Name, namespace: svc.Namespace, resourceVersion: svc.ResourceVersion}, svc.Spec.ClusterIP, svc.Spec.ClusterIPs)
	}
	return obj
}

// expandReduced returns what handlers are given for obj, a cached object or a tombstone's:
// the reduced Service a serviceIPs stands for; anything else as it is.
func expandReduced(obj any) any {
	if c, ok := obj.(*serviceIPs); ok {
		return c.service()
	}
	return obj
}

func reducedMeta(m objMeta, annotations map[string]string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: m.name, Namespace: m.namespace, ResourceVersion: m.resourceVersion, Annotations: annotations}
}

// collectionPath is the path of a collection of group/version, in namespace ns ("" all).
func collectionPath(groupVersion, resource, ns string) string {
	p := "/apis/" + groupVersion
	if groupVersion == "v1" {
		p = "/api/v1"
	}
	if ns != "" {
		p += "/namespaces/" + ns
	}
	return p + "/" + resource
}

// endpointSliceKind reads discovery.k8s.io/v1 EndpointSlices as their projections
// (translator.EndpointSlice), keeping only those of the services wanted; the others are read
// no further than their metadata.
func endpointSliceKind(ns string) shareKind {
	return shareKind{
		path:    collectionPath("discovery.k8s.io/v1", "endpointslices", ns),
		kind:    "EndpointSlice",
		service: func(m objMeta) string { return m.service },
		full: func(raw []byte) (runtime.Object, error) {
			es := &discoveryv1.EndpointSlice{}
			if err := es.Unmarshal(raw); err != nil {
				return nil, err
			}
			return translator.SlimEndpointSlice(es), nil
		},
		unwanted: func(objMeta, []byte) (runtime.Object, error) { return nil, nil },
		list: func(rv, cont string, items []runtime.Object) runtime.Object {
			return &translator.EndpointSliceList{ListMeta: metav1.ListMeta{ResourceVersion: rv, Continue: cont}, Items: itemsOf[translator.EndpointSlice](items)}
		},
		placeholder: func(m objMeta) runtime.Object {
			return &translator.EndpointSlice{ObjectMeta: reducedMeta(m, dropped), Service: m.service}
		},
	}
}

// serviceKind reads v1 Services: the projection of those wanted, and of the others their
// cluster IPs only (IsClusterIPsOnly), read without decoding the rest.
func serviceKind(ns string) shareKind {
	return shareKind{
		path:    collectionPath("v1", "services", ns),
		kind:    "Service",
		service: func(m objMeta) string { return m.name },
		full: func(raw []byte) (runtime.Object, error) {
			svc := &corev1.Service{}
			if err := svc.Unmarshal(raw); err != nil {
				return nil, err
			}
			return translator.ProjectService(svc), nil
		},
		unwanted: func(m objMeta, raw []byte) (runtime.Object, error) {
			ip, ips, err := peekSpecIPs(raw)
			if err != nil {
				return nil, err
			}
			return clusterIPsOf(m, ip, ips), nil
		},
		list: func(rv, cont string, items []runtime.Object) runtime.Object {
			return &corev1.ServiceList{ListMeta: metav1.ListMeta{ResourceVersion: rv, Continue: cont}, Items: itemsOf[corev1.Service](items)}
		},
		placeholder: func(m objMeta) runtime.Object {
			return &corev1.Service{ObjectMeta: reducedMeta(m, dropped)}
		},
	}
}

// itemsOf returns the items of a list, each a *T, as the Items of its List type.
func itemsOf[T any, P interface {
	*T
	runtime.Object
}](items []runtime.Object) []T {
	out := make([]T, len(items))
	for i, o := range items {
		out[i] = *o.(P)
	}
	return out
}
