package bench

import (
	"context"
	"fmt"

	"github.com/meridian-mesh/meridian/bench/gen"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

// kubeNodes is the number of Nodes --kube-policy creates, one zone each.
const kubeNodes = 3

var (
	serverGVR         = schema.GroupVersionResource{Group: "policy.linkerd.io", Version: "v1beta3", Resource: "servers"}
	serviceProfileGVR = schema.GroupVersionResource{Group: "linkerd.io", Version: "v1alpha2", Resource: "serviceprofiles"}
)

// createPolicy creates what the replicas' watches of Nodes, Servers and ServiceProfiles read
// (cfg.KubePolicy): kubeNodes Nodes with a zone each, in every namespace a Server of the
// services' port (opaque: it changes what the replicas send), and for every Service a
// ServiceProfile with one route, at most cfg.CreateConcurrency requests at a time.
func (w *kubeWorld) createPolicy(ctx context.Context) error {
	rc := rest.CopyConfig(w.env.Config)
	rc.QPS, rc.Burst = 10000, 20000 // as the typed client's (startKubeWorld)
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return err
	}
	c := w.cfg.Cluster
	var jobs []func(context.Context) error
	for i := range kubeNodes {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
			Name:   fmt.Sprintf("node-%d", i),
			Labels: map[string]string{corev1.LabelTopologyZone: fmt.Sprintf("zone-%c", 'a'+i)},
		}}
		jobs = append(jobs, func(ctx context.Context) error {
			_, err := w.client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
			return err
		})
	}
	for i := range c.Namespaces {
		ns := c.Namespace(i)
		srv := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "policy.linkerd.io/v1beta3", "kind": "Server",
			"metadata": map[string]any{"name": "all", "namespace": ns},
			"spec": map[string]any{
				"podSelector":   map[string]any{},
				"port":          int64(gen.TargetPort),
				"proxyProtocol": "opaque",
			},
		}}
		jobs = append(jobs, func(ctx context.Context) error {
			_, err := dyn.Resource(serverGVR).Namespace(ns).Create(ctx, srv, metav1.CreateOptions{})
			return err
		})
	}
	for i := range w.cluster.Services() {
		svc := c.Service(i)
		sp := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "linkerd.io/v1alpha2", "kind": "ServiceProfile",
			"metadata": map[string]any{"name": fmt.Sprintf("%s.%s.svc.%s", svc.Name, svc.Namespace, clusterDomain), "namespace": svc.Namespace},
			"spec": map[string]any{"routes": []any{map[string]any{
				"name":      "GET /",
				"condition": map[string]any{"method": "GET", "pathRegex": "/"},
			}}},
		}}
		jobs = append(jobs, func(ctx context.Context) error {
			_, err := dyn.Resource(serviceProfileGVR).Namespace(svc.Namespace).Create(ctx, sp, metav1.CreateOptions{})
			return err
		})
	}
	return w.runBounded(ctx, "creating nodes, servers and profiles", jobs)
}
