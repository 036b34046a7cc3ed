package injector

import (
	"encoding/json"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PatchOp is one RFC 6902 operation: "add", or "remove" (of a pod's own annotation whose
// value was ignored; it has no value).
type PatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value,omitempty"`
}

// Patch returns the JSON patch that performs m on the object whose pod metadata and spec
// are meta and spec, found under root ("" for a Pod, "/spec/template" for a workload's pod
// template). The patch adds, but for m.RemoveAnnotations: containers are inserted at the
// front in order, volumes appended, labels and annotations set (an existing key is replaced,
// as RFC 6902 "add" on an object member does), and the pod's own annotations of
// m.RemoveAnnotations removed.
func (m *Mutation) Patch(root string, meta *metav1.ObjectMeta, spec *corev1.PodSpec) []PatchOp {
	var ops []PatchOp
	add := func(path string, v any) { ops = append(ops, PatchOp{Op: "add", Path: root + path, Value: v}) }

	prepend := func(field string, have int, cs []corev1.Container) {
		if len(cs) == 0 {
			return
		}
		if have == 0 {
			add("/spec/"+field, cs)
			return
		}
		for i := range cs {
			add("/spec/"+field+"/"+strconv.Itoa(i), cs[i])
		}
	}
	prepend("initContainers", len(spec.InitContainers), m.InitContainers)
	prepend("containers", len(spec.Containers), m.Containers)

	if len(m.Volumes) > 0 {
		if len(spec.Volumes) == 0 {
			add("/spec/volumes", m.Volumes)
		} else {
			for i := range m.Volumes {
				add("/spec/volumes/-", m.Volumes[i])
			}
		}
	}
	setMap := func(field string, have, set map[string]string) {
		if len(set) == 0 {
			return
		}
		if len(have) == 0 {
			add("/metadata/"+field, set)
			return
		}
		keys := make([]string, 0, len(set))
		for k := range set {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			add("/metadata/"+field+"/"+escapePointer(k), set[k])
		}
	}
	setMap("labels", meta.Labels, m.Labels)
	setMap("annotations", meta.Annotations, m.Annotations)
	for _, k := range m.RemoveAnnotations {
		if _, ok := meta.Annotations[k]; ok {
			ops = append(ops, PatchOp{Op: "remove", Path: root + "/metadata/annotations/" + escapePointer(k)})
		}
	}
	return ops
}

// MarshalPatch encodes ops as a JSON array.
func MarshalPatch(ops []PatchOp) ([]byte, error) { return json.Marshal(ops) }

// escapePointer escapes a JSON Pointer reference token (RFC 6901).
func escapePointer(s string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(s)
}
