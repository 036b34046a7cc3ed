package translator

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// nodeLabels are the labels the projection of a Node keeps: its zone.
var nodeLabels = []string{corev1.LabelTopologyZone}

// ProjectNode returns the projection of a Node's metadata: its name, identity, zone label
// (topology.kubernetes.io/zone) and newest managedFields time. Nodes are read as metadata
// only: nothing else of them is needed.
func ProjectNode(m *metav1.ObjectMeta) *metav1.PartialObjectMetadata {
	if m == nil {
		return nil
	}
	return &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{Kind: "Node", APIVersion: "v1"},
		ObjectMeta: slimMeta(m, nodeLabels, nil),
	}
}

// IsSlimNode reports whether n is a projection of a Node (ProjectNode).
func IsSlimNode(n *metav1.PartialObjectMetadata) bool {
	return n == nil || (n.Namespace == "" && isSlimMeta(&n.ObjectMeta, nodeLabels, nil))
}

// NodeZone returns the zone of a Node ("" when it has none).
func NodeZone(n *metav1.PartialObjectMetadata) string {
	if n == nil {
		return ""
	}
	return n.Labels[corev1.LabelTopologyZone]
}
