package identity

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Event reasons, as in Linkerd.
const (
	ReasonIssuerUpdated = "IssuerUpdated"
	ReasonIssuerSkipped = "IssuerUpdateSkipped"
)

// EventSink records an event about the identity service (type "Normal" or "Warning").
// Event is called from the reload goroutine; it must not block for long.
type EventSink interface {
	Event(eventType, reason, message string)
}

// KubeEvents records events on an object (the identity Deployment) with the core/v1 Events
// API. Failures are returned to nobody: events are best effort, the log has the same line.
type KubeEvents struct {
	Client kubernetes.Interface
	Object corev1.ObjectReference
	// Timeout bounds one create call; zero means 5s.
	Timeout time.Duration
}

var _ EventSink = (*KubeEvents)(nil)

// Event implements EventSink.
func (k *KubeEvents) Event(eventType, reason, message string) {
	to := k.Timeout
	if to == 0 {
		to = 5 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), to)
	defer cancel()
	now := metav1.Now()
	ev := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{GenerateName: fmt.Sprintf("%s.", k.Object.Name), Namespace: k.Object.Namespace},
		InvolvedObject: k.Object,
		Type:           eventType,
		Reason:         reason,
		Message:        message,
		Source:         corev1.EventSource{Component: "meridian-identity"},
		FirstTimestamp: now,
		LastTimestamp:  now,
		Count:          1,
	}
	_, _ = k.Client.CoreV1().Events(k.Object.Namespace).Create(ctx, ev, metav1.CreateOptions{})
}
