package shard

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	pb "github.com/linkerd/linkerd2-proxy-api/go/destination"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/meridian-mesh/meridian/internal/kubetest"
	"github.com/meridian-mesh/meridian/internal/testutil"
	"github.com/meridian-mesh/meridian/shard/source"
)

func TestMain(m *testing.M) { os.Exit(testutil.Main(m, kubetest.Main)) }

// TestKubernetesReplica runs a destination replica on the Kubernetes source of a real API
// server and follows a Get stream over gRPC while Services, EndpointSlices and Pods are
// created, changed and deleted through the API, and while the API server restarts (which cuts
// every watch).
func TestKubernetesReplica(t *testing.T) {
	env := kubetest.Start(t)
	ns := env.Namespace(t, nil)
	cs := env.Client
	r, client, reg := startKubeReplica(t, env, source.KubernetesConfig{Namespace: ns}, false)

	slice := createWeb(t, cs, ns)
	waitService(t, r, ns, "web")
	sctx, scancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer scancel()
	gs, err := client.Get(sctx, &pb.GetDestination{Path: "web." + ns + ".svc.cluster.local:80"})
	if err != nil {
		t.Fatal(err)
	}
	s := newStream(gs)
	var v held
	expect := func(what string, want ...string) { t.Helper(); s.converge(t, &v, what, want...) }
	expect("initial", "10.7.0.1:8080", "10.7.0.2:8080")

	// Not ready -> Remove; pod relabelled meshed -> re-Add with identity.
	slice.Endpoints[1] = kubeEndpoint(ns, "10.7.0.2", "web-2", false)
	if slice, err = cs.DiscoveryV1().EndpointSlices(ns).Update(api(t), slice, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("not ready", "10.7.0.1:8080")
	p1, err := cs.CoreV1().Pods(ns).Get(api(t), "web-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p1.Labels["linkerd.io/control-plane-ns"] = "linkerd"
	if _, err := cs.CoreV1().Pods(ns).Update(api(t), p1, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for v.addrs[netipMust("10.7.0.1:8080")].GetTlsIdentity() == nil {
		if time.Now().After(deadline) {
			t.Fatal("relabelled pod never got an identity")
		}
		v.apply(t, s.next(t))
	}
	if id := v.addrs[netipMust("10.7.0.1:8080")].GetTlsIdentity().GetDnsLikeIdentity().GetName(); id != "web."+ns+".serviceaccount.identity.linkerd.cluster.local" {
		t.Fatalf("identity %q", id)
	}

	// The watch is cut: the API server restarts; changes made after it still arrive.
	env.Restart(t)
	slice.Endpoints[1] = kubeEndpoint(ns, "10.7.0.2", "web-2", true)
	testutil.EventuallyNoError(t, 30*time.Second, "an update after the restart", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		cur, err := cs.DiscoveryV1().EndpointSlices(ns).Get(ctx, "web-a", metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Endpoints = slice.Endpoints
		_, err = cs.DiscoveryV1().EndpointSlices(ns).Update(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	expect("after restart", "10.7.0.1:8080", "10.7.0.2:8080")

	// Slice deleted -> Remove of its addresses (NoEndpoints, since it was the only one).
	if err := cs.DiscoveryV1().EndpointSlices(ns).Delete(api(t), "web-a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("slice deleted")
	if v.noEndpoints == nil || !v.noEndpoints.GetExists() {
		t.Fatalf("after the last slice went: %v", v.noEndpoints)
	}
	checkInformerLag(t, reg)
}

// api returns a context for one call to the API server.
func api(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// createWeb creates, through the API, Service web of ns with pods web-1 (10.7.0.1) and web-2
// (10.7.0.2), unmeshed, and returns its one EndpointSlice, which lists both as ready.
func createWeb(t *testing.T, cs kubernetes.Interface, ns string) *discoveryv1.EndpointSlice {
	t.Helper()
	for _, name := range []string{"web-1", "web-2"} {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": "web"}},
			Spec:       corev1.PodSpec{ServiceAccountName: "web", Containers: []corev1.Container{{Name: "app", Image: "app"}}},
		}
		if _, err := cs.CoreV1().Pods(ns).Create(api(t), p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cs.CoreV1().Services(ns).Create(api(t), &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: "web-a", Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(int32(8080))}},
		Endpoints:   []discoveryv1.Endpoint{kubeEndpoint(ns, "10.7.0.1", "web-1", true), kubeEndpoint(ns, "10.7.0.2", "web-2", true)},
	}
	slice, err := cs.DiscoveryV1().EndpointSlices(ns).Create(api(t), slice, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return slice
}

func kubeEndpoint(ns, ip, podName string, ready bool) discoveryv1.Endpoint {
	return discoveryv1.Endpoint{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: &ready},
		TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: podName}}
}

// converge applies the stream's updates to v until v holds exactly want, within a generous
// deadline (informers, not timing, decide).
func (s *stream) converge(t *testing.T, v *held, what string, want ...string) {
	t.Helper()
	deadline := time.NewTimer(60 * time.Second)
	defer deadline.Stop()
	for strings.Join(v.keys(), ",") != strings.Join(want, ",") {
		select {
		case u := <-s.c:
			v.apply(t, u)
		case err := <-s.err:
			t.Fatalf("%s: stream ended: %v", what, err)
		case <-deadline.C:
			t.Fatalf("%s: client holds %v, want %v", what, v.keys(), want)
		}
	}
}

// checkInformerLag checks that the informer lag histograms saw updates of slices and pods.
func checkInformerLag(t *testing.T, reg *prometheus.Registry) {
	t.Helper()
	for _, name := range []string{"endpointslices_informer_lag_seconds", "pods_informer_lag_seconds"} {
		if testutil.HistogramSamples(t, reg, name) == 0 {
			t.Fatalf("no %s observations", name)
		}
	}
}
