package injector

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// NamespaceLookup returns a namespace's labels and annotations, which the decision and the
// overrides read (a pod in an admission request does not carry them). Namespace is called
// concurrently from webhook handler goroutines; it must honour ctx and must not modify or
// retain the returned maps after returning them (callers only read them).
type NamespaceLookup interface {
	Namespace(ctx context.Context, name string) (Meta, error)
}

// StaticNamespaces is a fixed NamespaceLookup for tests and the CLI. An unknown namespace
// has no labels or annotations. It must not be modified once in use.
type StaticNamespaces map[string]Meta

var _ NamespaceLookup = StaticNamespaces(nil)

// Namespace implements NamespaceLookup.
func (s StaticNamespaces) Namespace(_ context.Context, name string) (Meta, error) {
	return s[name], nil
}

// KubeNamespaces looks namespaces up with a GET on the API server for every admission
// request. A GET (rather than an informer cache) sees a namespace created a moment before
// its first pod, which is the common case in `kubectl apply` of a whole app; the cost is
// one small request per pod creation.
type KubeNamespaces struct {
	Client kubernetes.Interface
}

var _ NamespaceLookup = (*KubeNamespaces)(nil)

// Namespace implements NamespaceLookup.
func (k *KubeNamespaces) Namespace(ctx context.Context, name string) (Meta, error) {
	ns, err := k.Client.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return Meta{}, fmt.Errorf("get namespace %s: %w", name, err)
	}
	return Meta{Labels: ns.Labels, Annotations: ns.Annotations}, nil
}
