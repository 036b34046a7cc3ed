package snapshot

import "unique"

// PodPlace is where the pod behind an endpoint's address is: its namespace and node. A
// cluster has few of them (namespaces times nodes, far fewer in practice), so endpoints hold
// one through a canonical handle (MakePodPlace) rather than two strings each; the pod's name,
// distinct per pod, stays a plain string (Endpoint.Pod) whose bytes the pod already holds.
type PodPlace struct {
	// Namespace is the pod's namespace.
	Namespace string
	// NodeName is the pod's node ("" when unknown).
	NodeName string
}

// MakePodPlace returns the canonical handle of p (unique.Make), or the zero Handle ("neither
// namespace nor node") when p is the zero PodPlace. Equal values have equal handles (8 bytes,
// compared by ==): the endpoints of every pod of a namespace on one node share one copy of
// the two names across ports, services and recomputations, which lives while any endpoint
// holds it. unique.Make copies the strings (once per distinct place).
func MakePodPlace(p PodPlace) unique.Handle[PodPlace] {
	if p == (PodPlace{}) {
		return unique.Handle[PodPlace]{}
	}
	return unique.Make(p)
}

// PodRef names the pod behind an endpoint's address, and its node: the values of
// Endpoint.Pod and Endpoint.Place together.
type PodRef struct {
	// Name and Namespace name the pod.
	Name, Namespace string
	// NodeName is the pod's node ("" when unknown).
	NodeName string
}

// PodRef returns the pod behind the address and its node (the zero PodRef when there is
// neither).
func (e *Endpoint) PodRef() PodRef {
	p := e.place()
	return PodRef{Name: e.Pod, Namespace: p.Namespace, NodeName: p.NodeName}
}

// PodName returns the name of the pod behind the address, or "".
func (e *Endpoint) PodName() string { return e.Pod }

// PodNamespace returns the namespace of the pod behind the address, or "".
func (e *Endpoint) PodNamespace() string { return e.place().Namespace }

// NodeName returns the node of the pod behind the address, or "" when unknown.
func (e *Endpoint) NodeName() string { return e.place().NodeName }

// SetPod sets the pod behind the address and its node (all empty: none), its place through
// MakePodPlace.
func (e *Endpoint) SetPod(name, namespace, nodeName string) {
	e.Pod = name
	e.Place = MakePodPlace(PodPlace{Namespace: namespace, NodeName: nodeName})
}

// place returns the value of e.Place (the zero PodPlace for the zero Handle).
func (e *Endpoint) place() PodPlace {
	if e.Place == (unique.Handle[PodPlace]{}) {
		return PodPlace{}
	}
	return e.Place.Value()
}
