package shard

import (
	"context"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	pb "github.com/linkerd/linkerd2-proxy-api/go/destination"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/meridian-mesh/meridian/internal/grpcserver"
	"github.com/meridian-mesh/meridian/internal/kubetest"
	"github.com/meridian-mesh/meridian/shard/source"
)

func TestMain(m *testing.M) { os.Exit(kubetest.Main(m)) }

// TestKubernetesReplica runs a destination replica on the Kubernetes source of a real API
// server and follows a Get stream over gRPC while Services, EndpointSlices and Pods are
// created, changed and deleted through the API, and while the API server restarts (which cuts
// every watch).
func TestKubernetesReplica(t *testing.T) {
	env := kubetest.Start(t)
	ns := env.Namespace(t, nil)
	api := func() context.Context {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		t.Cleanup(cancel)
		return ctx
	}
	reg := prometheus.NewRegistry()
	log := zaptest.NewLogger(t)
	src := source.NewKubernetes(env.Client, source.KubernetesConfig{Namespace: ns}, reg, log)
	r := NewReplica(DefaultConfig(), src, reg, log)
	gs := grpcserver.New(reg)
	r.Register(gs)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _ = r.Run(ctx) }()
	go func() { defer wg.Done(); _ = grpcserver.Serve(ctx, gs, lis, time.Second) }()
	defer func() { cancel(); wg.Wait() }()
	deadline := time.Now().Add(60 * time.Second)
	for r.Ready() != nil {
		if time.Now().After(deadline) {
			t.Fatalf("replica not ready: %v", r.Ready())
		}
		time.Sleep(20 * time.Millisecond)
	}

	cs := env.Client
	pod := func(name, ip string, meshed bool) *corev1.Pod {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": "web"}},
			Spec:       corev1.PodSpec{ServiceAccountName: "web", Containers: []corev1.Container{{Name: "app", Image: "app"}}},
		}
		if meshed {
			p.Labels["linkerd.io/control-plane-ns"] = "linkerd"
		}
		return p
	}
	for _, p := range []*corev1.Pod{pod("web-1", "10.7.0.1", false), pod("web-2", "10.7.0.2", false)} {
		if _, err := cs.CoreV1().Pods(ns).Create(api(), p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cs.CoreV1().Services(ns).Create(api(), &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ready := func(ip, podName string, ok bool) discoveryv1.Endpoint {
		return discoveryv1.Endpoint{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: &ok},
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: podName}}
	}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: "web-a", Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(int32(8080))}},
		Endpoints:   []discoveryv1.Endpoint{ready("10.7.0.1", "web-1", true), ready("10.7.0.2", "web-2", true)},
	}
	slice, err = cs.DiscoveryV1().EndpointSlices(ns).Create(api(), slice, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitService(t, &env2{r}, ns, "web")

	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	sctx, scancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer scancel()
	gs2, err := pb.NewDestinationClient(conn).Get(sctx, &pb.GetDestination{Path: "web." + ns + ".svc.cluster.local:80"})
	if err != nil {
		t.Fatal(err)
	}
	s := newStream(gs2)
	var v held
	// The stream converges on want, within a generous deadline (informers, not timing, decide).
	expect := func(what string, want ...string) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for strings.Join(v.keys(), ",") != strings.Join(want, ",") {
			if time.Now().After(deadline) {
				t.Fatalf("%s: client holds %v, want %v", what, v.keys(), want)
			}
			select {
			case u := <-s.c:
				v.apply(t, u)
			case err := <-s.err:
				t.Fatalf("%s: stream ended: %v", what, err)
			case <-time.After(time.Until(deadline)):
			}
		}
	}
	expect("initial", "10.7.0.1:8080", "10.7.0.2:8080")

	// Not ready -> Remove; pod relabelled meshed -> re-Add with identity.
	slice.Endpoints[1] = ready("10.7.0.2", "web-2", false)
	if slice, err = cs.DiscoveryV1().EndpointSlices(ns).Update(api(), slice, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("not ready", "10.7.0.1:8080")
	p1, err := cs.CoreV1().Pods(ns).Get(api(), "web-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p1.Labels["linkerd.io/control-plane-ns"] = "linkerd"
	if _, err := cs.CoreV1().Pods(ns).Update(api(), p1, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(60 * time.Second)
	for v.addrs[netipMust("10.7.0.1:8080")].GetTlsIdentity() == nil {
		if time.Now().After(deadline) {
			t.Fatal("relabelled pod never got an identity")
		}
		v.apply(t, recv(t, s))
	}
	if id := v.addrs[netipMust("10.7.0.1:8080")].GetTlsIdentity().GetDnsLikeIdentity().GetName(); id != "web."+ns+".serviceaccount.identity.linkerd.cluster.local" {
		t.Fatalf("identity %q", id)
	}

	// The watch is cut: the API server restarts; changes made after it still arrive.
	env.Restart(t)
	slice.Endpoints[1] = ready("10.7.0.2", "web-2", true)
	for i := 0; ; i++ {
		cur, err := cs.DiscoveryV1().EndpointSlices(ns).Get(api(), "web-a", metav1.GetOptions{})
		if err == nil {
			cur.Endpoints = slice.Endpoints
			if slice, err = cs.DiscoveryV1().EndpointSlices(ns).Update(api(), cur, metav1.UpdateOptions{}); err == nil {
				break
			}
		}
		if i > 50 {
			t.Fatalf("update after restart: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	expect("after restart", "10.7.0.1:8080", "10.7.0.2:8080")

	// Slice deleted -> Remove of its addresses (NoEndpoints, since it was the only one).
	if err := cs.DiscoveryV1().EndpointSlices(ns).Delete(api(), "web-a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("slice deleted")
	if v.noEndpoints == nil || !v.noEndpoints.GetExists() {
		t.Fatalf("after the last slice went: %v", v.noEndpoints)
	}

	// The informer lag histograms saw the updates.
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]uint64{}
	for _, mf := range mfs {
		if strings.HasSuffix(mf.GetName(), "_informer_lag_seconds") {
			for _, m := range mf.GetMetric() {
				seen[mf.GetName()] += m.GetHistogram().GetSampleCount()
			}
		}
	}
	if seen["endpointslices_informer_lag_seconds"] == 0 || seen["pods_informer_lag_seconds"] == 0 {
		t.Fatalf("informer lag observations: %v", seen)
	}
}

// env2 adapts a bare replica to waitService.
type env2 struct{ replica *Replica }
