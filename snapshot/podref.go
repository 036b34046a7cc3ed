package snapshot

import "unique"

// PodRef names the pod behind an endpoint's address, and its node. It is the same for every
// port and every service of the pod, so endpoints hold it through one canonical handle
// (MakePodRef) rather than three strings each.
type PodRef struct {
	// Name and Namespace name the pod.
	Name, Namespace string
	// NodeName is the pod's node ("" when unknown).
	NodeName string
}

// MakePodRef returns the canonical handle of r (unique.Make), or the zero Handle ("no pod")
// when r is the zero PodRef. Equal values have equal handles (8 bytes, compared by ==): the
// endpoints of one pod share one copy of its names across ports, services and
// recomputations, which lives while any endpoint holds it. unique.Make copies the strings.
func MakePodRef(r PodRef) unique.Handle[PodRef] {
	if r == (PodRef{}) {
		return unique.Handle[PodRef]{}
	}
	return unique.Make(r)
}

// PodRef returns the pod behind the address (the zero PodRef when there is none).
func (e *Endpoint) PodRef() PodRef {
	if e.Pod == (unique.Handle[PodRef]{}) {
		return PodRef{}
	}
	return e.Pod.Value()
}

// PodName returns the name of the pod behind the address, or "".
func (e *Endpoint) PodName() string {
	if e.Pod == (unique.Handle[PodRef]{}) {
		return ""
	}
	return e.Pod.Value().Name
}

// PodNamespace returns the namespace of the pod behind the address, or "".
func (e *Endpoint) PodNamespace() string {
	if e.Pod == (unique.Handle[PodRef]{}) {
		return ""
	}
	return e.Pod.Value().Namespace
}

// NodeName returns the node of the pod behind the address, or "" when unknown.
func (e *Endpoint) NodeName() string {
	if e.Pod == (unique.Handle[PodRef]{}) {
		return ""
	}
	return e.Pod.Value().NodeName
}

// SetPod sets the pod behind the address (all empty: none), through MakePodRef.
func (e *Endpoint) SetPod(name, namespace, nodeName string) {
	e.Pod = MakePodRef(PodRef{Name: name, Namespace: namespace, NodeName: nodeName})
}
