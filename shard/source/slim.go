package source

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// lastAppliedAnnotation holds a copy of the whole object written by kubectl apply.
const lastAppliedAnnotation = corev1.LastAppliedConfigAnnotation

// proxyEnvPrefix names the proxy's environment variables, which the destination reads (the
// inbound port for opaque transport); other environment variables are dropped.
const proxyEnvPrefix = "LINKERD2_PROXY_"

// slimObject is the informers' transform. It runs on every object before it enters the
// cache and the handlers see it, and strips what Meridian never reads:
//
//   - managedFields become one entry carrying only the newest time (and its manager and
//     operation), which the lag metric reads in the update handler. The transform runs
//     before the handler, so the time has to survive it in the object itself; keeping it
//     there (rather than in a side map) is exact and needs no cleanup.
//   - the kubectl last-applied-configuration annotation.
//   - for Pods: volumes, affinity, tolerations, security contexts, image pull secrets,
//     ephemeral containers, and per container the command, args, resources, probes,
//     lifecycle, volume mounts, and every environment variable except LINKERD2_PROXY_*.
//     Kept: metadata (labels, annotations, owners), serviceAccountName, node, hostname,
//     subdomain, container names, images and ports, and the whole status.
//
// It mutates in place (safe since client-go 1.27) and is idempotent, as client-go requires.
func slimObject(obj any) (any, error) {
	switch o := obj.(type) {
	case *corev1.Service:
		slimMeta(&o.ObjectMeta)
	case *discoveryv1.EndpointSlice:
		slimMeta(&o.ObjectMeta)
	case *corev1.Pod:
		slimMeta(&o.ObjectMeta)
		slimPodSpec(&o.Spec)
	case cache.DeletedFinalStateUnknown:
		// Its object comes from the cache and was transformed on its way in.
	}
	return obj, nil
}

func slimMeta(m *metav1.ObjectMeta) {
	if len(m.ManagedFields) > 0 {
		newest := m.ManagedFields[0]
		for _, f := range m.ManagedFields[1:] {
			if f.Time != nil && (newest.Time == nil || newest.Time.Before(f.Time)) {
				newest = f
			}
		}
		if newest.Time == nil {
			m.ManagedFields = nil
		} else {
			m.ManagedFields = []metav1.ManagedFieldsEntry{{
				Manager:   newest.Manager,
				Operation: newest.Operation,
				Time:      newest.Time,
			}}
		}
	}
	if _, ok := m.Annotations[lastAppliedAnnotation]; ok {
		delete(m.Annotations, lastAppliedAnnotation)
	}
}

func slimPodSpec(s *corev1.PodSpec) {
	s.Volumes = nil
	s.Affinity = nil
	s.Tolerations = nil
	s.TopologySpreadConstraints = nil
	s.SecurityContext = nil
	s.ImagePullSecrets = nil
	s.EphemeralContainers = nil
	for i := range s.InitContainers {
		slimContainer(&s.InitContainers[i])
	}
	for i := range s.Containers {
		slimContainer(&s.Containers[i])
	}
}

func slimContainer(c *corev1.Container) {
	c.Command, c.Args, c.EnvFrom = nil, nil, nil
	c.Resources = corev1.ResourceRequirements{}
	c.ResizePolicy = nil
	c.VolumeMounts, c.VolumeDevices = nil, nil
	c.LivenessProbe, c.ReadinessProbe, c.StartupProbe = nil, nil, nil
	c.Lifecycle = nil
	c.SecurityContext = nil
	if len(c.Env) > 0 {
		kept := c.Env[:0]
		for _, e := range c.Env {
			if strings.HasPrefix(e.Name, proxyEnvPrefix) {
				kept = append(kept, e)
			}
		}
		if len(kept) == 0 {
			kept = nil
		}
		c.Env = kept
	}
}
