package translator

import (
	"reflect"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The IsSlim functions report whether an object holds nothing that its Slim function would
// drop, so that a consumer may keep the object itself instead of a copy (Project). A true
// answer means that SlimX(o) equals o, except that empty lists and maps may be nil; a false
// answer means it does not. They allocate nothing. Nil is slim.

// IsSlimService reports whether s is a projection (serviceFields).
func IsSlimService(s *corev1.Service) bool {
	if s == nil {
		return true
	}
	if !isSlimMeta(&s.ObjectMeta, nil, serviceAnnotations) || !zeroExcept(reflect.ValueOf(&s.Spec).Elem(), serviceSpecKept) ||
		!reflect.ValueOf(&s.Status).Elem().IsZero() {
		return false
	}
	for i := range s.Spec.Ports {
		p := &s.Spec.Ports[i]
		if *p != (corev1.ServicePort{Name: p.Name, Protocol: p.Protocol, Port: p.Port, TargetPort: p.TargetPort}) {
			return false
		}
	}
	return true
}

// isSlimMeta reports whether m holds only what slimMeta keeps with these labels and
// annotations (allKeys: any).
func isSlimMeta(m *metav1.ObjectMeta, labels, annotations []string) bool {
	//lint:ignore SA1019 selfLink is deprecated, but old objects and manifests can still carry it
	if m.GenerateName != "" || m.SelfLink != "" || m.Generation != 0 || !m.CreationTimestamp.IsZero() ||
		m.DeletionTimestamp != nil || m.DeletionGracePeriodSeconds != nil || len(m.Finalizers) != 0 || len(m.OwnerReferences) != 0 {
		return false
	}
	switch len(m.ManagedFields) {
	case 0:
	case 1:
		f := &m.ManagedFields[0]
		if f.Time == nil || *f != (metav1.ManagedFieldsEntry{Manager: f.Manager, Operation: f.Operation, Time: f.Time}) {
			return false
		}
	default:
		return false
	}
	return onlyKeys(m.Labels, labels) && onlyKeys(m.Annotations, annotations)
}

// onlyKeys reports whether every key of m is one of keys (any, for allKeys).
func onlyKeys(m map[string]string, keys []string) bool {
	if len(keys) == 1 && keys[0] == allKeys[0] {
		return true
	}
	for k := range m {
		if !slices.Contains(keys, k) {
			return false
		}
	}
	return true
}

// The fields of the structs that IsSlimService checks by reflection (so that a
// field a new Kubernetes version adds counts as one to drop) which the projection keeps.
var (
	serviceSpecKept = fieldIndexes[corev1.ServiceSpec]("Type", "ExternalName", "ClusterIP", "ClusterIPs", "InternalTrafficPolicy", "Ports")
)

// fieldIndexes returns the indexes of the named fields of the struct T. The names are
// constants of this package, and every one is also used directly by the Slim functions, so
// a missing one cannot compile there.
func fieldIndexes[T any](names ...string) []int {
	t := reflect.TypeFor[T]()
	out := make([]int, len(names))
	for i, n := range names {
		f, ok := t.FieldByName(n)
		if !ok {
			panic("translator: " + t.String() + " has no field " + n)
		}
		out[i] = f.Index[0]
	}
	return out
}

// zeroExcept reports whether every field of the struct v is zero but those at the indexes
// kept.
func zeroExcept(v reflect.Value, kept []int) bool {
	for i := range v.NumField() {
		if !slices.Contains(kept, i) && !v.Field(i).IsZero() {
			return false
		}
	}
	return true
}
