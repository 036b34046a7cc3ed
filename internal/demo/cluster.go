package demo

import (
	"context"
	"sort"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"

	"github.com/meridian-mesh/meridian/internal/manifest"
)

// Cluster is what the demo reads of the example cluster: its Pods (what it runs) and
// Services (what the view follows). Values are immutable once made.
type Cluster struct {
	Pods     []*corev1.Pod     // sorted by namespace, name
	Services []*corev1.Service // sorted by namespace, name
}

// clusterDecoder decodes Pods and Services of v1 strictly (as the destination's directory
// source does); other kinds are ignored.
var clusterDecoder = manifest.NewDecoder(
	manifest.Kind{Kind: "Pod", Versions: []string{"v1"}, Decode: decodeInto[corev1.Pod]},
	manifest.Kind{Kind: "Service", Versions: []string{"v1"}, Decode: decodeInto[corev1.Service]},
)

// kubeObject is a pointer to a Kubernetes object type.
type kubeObject[T any] interface {
	*T
	GetNamespace() string
	GetName() string
}

func decodeInto[T any, P kubeObject[T]](_ manifest.TypeMeta, data []byte) (manifest.Decoded, error) {
	obj := P(new(T))
	if err := manifest.DecodeStrict(data, obj); err != nil {
		return manifest.Decoded{}, err
	}
	ns := obj.GetNamespace()
	if ns == "" {
		ns = "default"
	}
	return manifest.Decoded{Namespace: ns, Name: obj.GetName(), Value: obj}, nil
}

// clusterOf collects an update's Pods and Services.
func clusterOf(u manifest.Update) *Cluster {
	c := &Cluster{}
	for _, o := range u.All {
		switch v := o.Value.(type) {
		case *corev1.Pod:
			if v.Namespace == "" {
				v = v.DeepCopy()
				v.Namespace = o.Key.Namespace
			}
			c.Pods = append(c.Pods, v)
		case *corev1.Service:
			if v.Namespace == "" {
				v = v.DeepCopy()
				v.Namespace = o.Key.Namespace
			}
			c.Services = append(c.Services, v)
		}
	}
	sort.Slice(c.Pods, func(i, j int) bool {
		return nsName(c.Pods[i].Namespace, c.Pods[i].Name) < nsName(c.Pods[j].Namespace, c.Pods[j].Name)
	})
	sort.Slice(c.Services, func(i, j int) bool {
		return nsName(c.Services[i].Namespace, c.Services[i].Name) < nsName(c.Services[j].Namespace, c.Services[j].Name)
	})
	return c
}

func nsName(ns, name string) string { return ns + "/" + name }

// ClusterDir follows the example directory: the demo plans its processes from the first
// read and the view follows the Services as they change.
type ClusterDir struct {
	dir *manifest.Dir

	mu      sync.Mutex
	current *Cluster
	first   chan struct{} // closed at the first delivery
}

// NewClusterDir returns a follower of path (not started: Run it).
func NewClusterDir(path string, log *zap.Logger) *ClusterDir {
	return &ClusterDir{dir: manifest.NewDir(manifest.DefaultConfig(path), clusterDecoder, prometheus.NewRegistry(), log), first: make(chan struct{})}
}

// Run follows the directory until ctx ends.
func (c *ClusterDir) Run(ctx context.Context) error {
	return c.dir.Run(ctx, func(u manifest.Update) {
		cl := clusterOf(u)
		c.mu.Lock()
		initial := c.current == nil
		c.current = cl
		c.mu.Unlock()
		if initial {
			close(c.first)
		}
	})
}

// First is closed once the directory has been read.
func (c *ClusterDir) First() <-chan struct{} { return c.first }

// Current is the latest read (nil before the first).
func (c *ClusterDir) Current() *Cluster {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.current
}

// Warnings are the directory's problems ("file:line: reason").
func (c *ClusterDir) Warnings() []string { return c.dir.Warnings() }
