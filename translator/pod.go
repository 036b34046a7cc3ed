package translator

import (
	"net/netip"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// Pod is the projection of a core/v1 Pod (podFields): what this package reads of it, in a
// form of its own rather than the API type's. A replica keeps the pods the endpoints of the
// services it owns name, and those GetProfile by IP finds on it, so its size is what a
// cluster's pods cost. A corev1.Pod is a 1,240-byte struct before its strings,
// labels and containers; a Pod is 192 bytes, and what pods repeat is shared: the names of
// namespaces, nodes, service accounts, owners and ports are held once (name), and pods with
// the same labels share one map (StringMap), as do pods with the same port annotations.
//
// It is a runtime.Object and a metav1.Object, so that the informers cache it and their key
// functions, and the lag histograms, read it. Of the metav1.Object fields it keeps the
// identity (name, namespace, uid, resourceVersion), the labels, the port annotations, the
// deletion timestamp, the controller reference (as its kind and name) and the newest
// managedFields time; a setter of any other field does nothing, as the projection would drop
// what it set. Nothing in it is modified once it is made, by convention as for any cached
// object; its shared parts (labels, annotations) never are.
type Pod struct {
	Name            string
	UID             types.UID
	ResourceVersion string
	namespace       name
	labels          *StringMap // every label: a Server's pod selector may name any
	annotations     *StringMap // the port annotations only (podAnnotations)
	deletion        *metav1.Time
	managed         int64 // the newest managedFields time, in Unix nanoseconds (0: none)
	ownerKind       name  // the controller reference, or the only reference
	ownerName       name
	serviceAccount  name // as the spec gives it ("" when unset)
	node            name
	phase           name
	// ips are the pod-network addresses from status.podIPs (or status.podIP when none of
	// those is one): parsed, unmapped, distinct, and without zones.
	ips         []netip.Addr
	ports       []NamedPort
	hostNetwork bool
	// inboundPort is the port of the pod's proxy container's LINKERD2_PROXY_INBOUND_LISTEN_ADDR
	// (ProxyInboundPort); 0 when it has none.
	inboundPort uint16
}

// NamedPort is a named port of one of a pod's containers or init containers.
type NamedPort struct {
	name name
	Port int32
	// Init is set for a port of an init container (where native sidecars run).
	Init bool
}

// Name returns the port's name.
func (p NamedPort) Name() string { return str(p.name) }

// SlimPod returns the projection of p (podFields), a new object sharing only strings with p
// (its maps are shared with other projections, never with p).
// Nil in, nil out.
func SlimPod(p *corev1.Pod) *Pod {
	if p == nil {
		return nil
	}
	out := &Pod{
		Name:            p.Name,
		UID:             p.UID,
		ResourceVersion: p.ResourceVersion,
		namespace:       mkName(p.Namespace),
		labels:          internMap(p.Labels, allKeys),
		annotations:     internMap(p.Annotations, podAnnotations),
		serviceAccount:  mkName(p.Spec.ServiceAccountName),
		node:            mkName(p.Spec.NodeName),
		phase:           mkName(string(p.Status.Phase)),
		hostNetwork:     p.Spec.HostNetwork,
	}
	out.SetDeletionTimestamp(p.DeletionTimestamp)
	out.SetManagedFields(p.ManagedFields)
	out.SetOwnerReferences(p.OwnerReferences)
	for _, cs := range [...]struct {
		cs   []corev1.Container
		init bool
	}{{p.Spec.InitContainers, true}, {p.Spec.Containers, false}} {
		for i := range cs.cs {
			for _, cp := range cs.cs[i].Ports {
				if cp.Name != "" {
					out.ports = append(out.ports, NamedPort{name: mkName(cp.Name), Port: cp.ContainerPort, Init: cs.init})
				}
			}
		}
	}
	out.ips = podAddrs(p)
	out.inboundPort = ProxyInboundPort(&p.Spec)
	return out
}

// ProxyContainerName is the name of the proxy's container, and EnvInboundListenAddr the
// variable of its environment that gives its inbound address (both as Linkerd's injector and
// Meridian's write them).
const (
	ProxyContainerName   = "linkerd-proxy"
	EnvInboundListenAddr = "LINKERD2_PROXY_INBOUND_LISTEN_ADDR"
)

// ProxyInboundPort returns the inbound port of spec's proxy: the port of EnvInboundListenAddr
// in the first container named ProxyContainerName, init containers first (a native sidecar),
// as linkerd2's destination reads it (getInboundPort). It is 0 when there is no such
// variable, or its value is not an address with a port other than 0; the opaque-transport
// port is then the configured one (Config.InboundProxyPort), where Linkerd sends none.
func ProxyInboundPort(spec *corev1.PodSpec) uint16 {
	for _, cs := range [...][]corev1.Container{spec.InitContainers, spec.Containers} {
		for i := range cs {
			if cs[i].Name != ProxyContainerName {
				continue
			}
			for _, e := range cs[i].Env {
				if e.Name == EnvInboundListenAddr {
					ap, err := netip.ParseAddrPort(e.Value)
					if err != nil {
						return 0
					}
					return ap.Port()
				}
			}
		}
	}
	return 0
}

// podAddrs returns the addresses of p's status (Pod.IPs).
func podAddrs(p *corev1.Pod) []netip.Addr {
	var ips []netip.Addr
	for _, ip := range p.Status.PodIPs {
		ips = addIP(ips, ip.IP)
	}
	if len(ips) == 0 && p.Status.PodIP != "" {
		ips = addIP(ips, p.Status.PodIP)
	}
	if ips != nil {
		ips = slices.Clip(ips)
	}
	return ips
}

// NetworkIPs returns what PodIPs returns for p's projection (SlimPod), without making one:
// a source that keeps some pods only decides by it, before it projects the pod.
func NetworkIPs(p *corev1.Pod) []netip.Addr {
	if p == nil || !findable(p.Spec.HostNetwork, p.DeletionTimestamp != nil, p.Status.Phase) {
		return nil
	}
	return podAddrs(p)
}

// addIP appends the address s to ips when it is one, without a zone, and not there yet.
func addIP(ips []netip.Addr, s string) []netip.Addr {
	if a, err := netip.ParseAddr(s); err == nil && a.Zone() == "" && !slices.Contains(ips, a.Unmap()) {
		return append(ips, a.Unmap())
	}
	return ips
}

// Variant returns a copy of p named name, on node, with the addresses ips (which it keeps):
// everything else is p's. A source that synthesizes the pods of a workload (the bench feed)
// projects one and derives the others, which differ only in these, cheaply.
func (p *Pod) Variant(name, node string, ips []netip.Addr) *Pod {
	out := *p
	out.Name, out.node, out.ips = name, mkName(node), ips
	return &out
}

// Namespace returns the pod's namespace.
func (p *Pod) Namespace() string { return str(p.namespace) }

// NodeName returns the pod's node ("": not scheduled).
func (p *Pod) NodeName() string { return str(p.node) }

// ServiceAccountName returns the pod's service account as its spec gives it ("": unset).
func (p *Pod) ServiceAccountName() string { return str(p.serviceAccount) }

// Phase returns the pod's phase.
func (p *Pod) Phase() corev1.PodPhase { return corev1.PodPhase(str(p.phase)) }

// HostNetwork reports whether the pod runs on its node's network.
func (p *Pod) HostNetwork() bool { return p.hostNetwork }

// InboundPort returns the inbound port its proxy's environment gives (ProxyInboundPort): 0
// when it gives none.
func (p *Pod) InboundPort() uint16 { return p.inboundPort }

// IPs returns the pod's addresses (see PodIPs for those it may be found by). The slice must
// not be modified.
func (p *Pod) IPs() []netip.Addr { return p.ips }

// NamedPorts returns the named ports of the pod's containers and init containers, init
// containers' first, each in its container's order. The slice must not be modified.
func (p *Pod) NamedPorts() []NamedPort { return p.ports }

// Label returns the pod's label k ("" when it has none).
func (p *Pod) Label(k string) string {
	v, _ := p.labels.Get(k)
	return v
}

// controller returns the kind and name of the pod's controller reference (or its only one).
func (p *Pod) controller() (kind, name string) { return str(p.ownerKind), str(p.ownerName) }

// NewestManagedTime returns the newest managedFields time (zero: none), which
// internal/kube's lag histograms read without building the entries.
func (p *Pod) NewestManagedTime() time.Time {
	if p.managed == 0 {
		return time.Time{}
	}
	return time.Unix(0, p.managed).UTC()
}

// GetObjectKind implements runtime.Object: a Pod keeps no kind.
func (p *Pod) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject implements runtime.Object.
func (p *Pod) DeepCopyObject() runtime.Object { return p.DeepCopy() }

// DeepCopy returns a copy of p (nil for nil). It shares p's strings, names and maps, which
// are never modified.
func (p *Pod) DeepCopy() *Pod {
	if p == nil {
		return nil
	}
	out := *p
	out.deletion = clonePtr(p.deletion)
	out.ips = slices.Clone(p.ips)
	out.ports = slices.Clone(p.ports)
	return &out
}

// The metav1.Object methods.

func (p *Pod) GetNamespace() string                  { return p.Namespace() }
func (p *Pod) SetNamespace(ns string)                { p.namespace = mkName(ns) }
func (p *Pod) GetName() string                       { return p.Name }
func (p *Pod) SetName(n string)                      { p.Name = n }
func (p *Pod) GetGenerateName() string               { return "" }
func (p *Pod) SetGenerateName(string)                {}
func (p *Pod) GetUID() types.UID                     { return p.UID }
func (p *Pod) SetUID(uid types.UID)                  { p.UID = uid }
func (p *Pod) GetResourceVersion() string            { return p.ResourceVersion }
func (p *Pod) SetResourceVersion(v string)           { p.ResourceVersion = v }
func (p *Pod) GetGeneration() int64                  { return 0 }
func (p *Pod) SetGeneration(int64)                   {}
func (p *Pod) GetSelfLink() string                   { return "" }
func (p *Pod) SetSelfLink(string)                    {}
func (p *Pod) GetCreationTimestamp() metav1.Time     { return metav1.Time{} }
func (p *Pod) SetCreationTimestamp(metav1.Time)      {}
func (p *Pod) GetDeletionTimestamp() *metav1.Time    { return p.deletion }
func (p *Pod) GetDeletionGracePeriodSeconds() *int64 { return nil }
func (p *Pod) SetDeletionGracePeriodSeconds(*int64)  {}
func (p *Pod) GetFinalizers() []string               { return nil }
func (p *Pod) SetFinalizers([]string)                {}

// GetLabels returns every label of the pod; the map is shared and must not be modified.
func (p *Pod) GetLabels() map[string]string { return p.labels.Map() }

// SetLabels sets the labels to (the shared map of) the entries of ls.
func (p *Pod) SetLabels(ls map[string]string) { p.labels = internMap(ls, allKeys) }

// GetAnnotations returns the pod's port annotations; the map is shared and must not be
// modified.
func (p *Pod) GetAnnotations() map[string]string { return p.annotations.Map() }

// SetAnnotations sets the annotations to the port annotations of as.
func (p *Pod) SetAnnotations(as map[string]string) { p.annotations = internMap(as, podAnnotations) }

// SetDeletionTimestamp sets the deletion timestamp (a copy of t).
func (p *Pod) SetDeletionTimestamp(t *metav1.Time) { p.deletion = clonePtr(t) }

// GetOwnerReferences returns the controller reference, with its kind and name only (nil:
// none). It allocates.
func (p *Pod) GetOwnerReferences() []metav1.OwnerReference {
	kind, n := p.controller()
	if kind == "" && n == "" {
		return nil
	}
	yes := true
	return []metav1.OwnerReference{{Kind: kind, Name: n, Controller: &yes}}
}

// SetOwnerReferences keeps the kind and name of the controller reference of refs, or of its
// only reference when none is marked controller.
func (p *Pod) SetOwnerReferences(refs []metav1.OwnerReference) {
	p.ownerKind, p.ownerName = name{}, name{}
	if ref := controllerRef(refs); ref != nil {
		p.ownerKind, p.ownerName = mkName(ref.Kind), mkName(ref.Name)
	}
}

// GetManagedFields returns an entry with the newest managedFields time only (nil: none). It
// allocates.
func (p *Pod) GetManagedFields() []metav1.ManagedFieldsEntry {
	if p.managed == 0 {
		return nil
	}
	t := metav1.NewTime(p.NewestManagedTime())
	return []metav1.ManagedFieldsEntry{{Time: &t}}
}

// SetManagedFields keeps the newest time of fs.
func (p *Pod) SetManagedFields(fs []metav1.ManagedFieldsEntry) {
	p.managed = 0
	if f := newestEntry(fs); f != nil {
		p.managed = f.Time.UnixNano()
	}
}
