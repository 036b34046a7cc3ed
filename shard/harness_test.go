package shard

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	pb "github.com/linkerd/linkerd2-proxy-api/go/destination"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/meridian-mesh/meridian/internal/grpcserver"
	"github.com/meridian-mesh/meridian/internal/testutil"
	"github.com/meridian-mesh/meridian/internal/wire"
	"github.com/meridian-mesh/meridian/shard/source"
	"github.com/meridian-mesh/meridian/translator"
)

// pushSource is a source.Source driven by the test: objects are kept (as a real source's
// cache would) and handed to the replica's handler as the test pushes them. It is a fake
// behind our own seam; the real sources have their own tests.
type pushSource struct {
	mu       sync.Mutex
	h        source.Handler
	ready    chan struct{}
	synced   atomic.Bool
	services map[string]*corev1.Service
	slices   map[string]*translator.EndpointSlice
	pods     map[string]*translator.Pod
}

func newPushSource() *pushSource {
	return &pushSource{ready: make(chan struct{}), services: map[string]*corev1.Service{},
		slices: map[string]*translator.EndpointSlice{}, pods: map[string]*translator.Pod{}}
}

func (s *pushSource) Run(ctx context.Context, h source.Handler) error {
	s.mu.Lock()
	s.h = h
	s.mu.Unlock()
	s.synced.Store(true)
	close(s.ready)
	<-ctx.Done()
	return nil
}

func (s *pushSource) Synced() bool { return s.synced.Load() }

func (s *pushSource) Pod(ns, name string) *translator.Pod {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pods[ns+"/"+name]
}

func (s *pushSource) Replay(ctx context.Context) error {
	s.mu.Lock()
	h := s.h
	var svcs []*corev1.Service
	var slices []*translator.EndpointSlice
	for _, v := range s.services {
		svcs = append(svcs, v)
	}
	for _, v := range s.slices {
		slices = append(slices, v)
	}
	s.mu.Unlock()
	for _, v := range svcs {
		h.OnService(v, false)
	}
	for _, v := range slices {
		h.OnEndpointSlice(v, false)
	}
	return nil
}

// keep records v under key in m (or forgets it when deleted) and returns the handler to pass
// the event on to.
func keep[T any](s *pushSource, m map[string]T, key string, v T, deleted bool) source.Handler {
	s.mu.Lock()
	defer s.mu.Unlock()
	if deleted {
		delete(m, key)
	} else {
		m[key] = v
	}
	return s.h
}

func (s *pushSource) OnService(v *corev1.Service, deleted bool) {
	keep(s, s.services, v.Namespace+"/"+v.Name, v, deleted).OnService(v, deleted)
}

func (s *pushSource) OnEndpointSlice(v *translator.EndpointSlice, deleted bool) {
	keep(s, s.slices, v.Namespace+"/"+v.Name, v, deleted).OnEndpointSlice(v, deleted)
}

func (s *pushSource) OnPod(v *translator.Pod, deleted bool) {
	keep(s, s.pods, v.Namespace()+"/"+v.Name, v, deleted).OnPod(v, deleted)
}

// handler waits for Run and returns the source itself, which records and forwards.
func (s *pushSource) handler(t *testing.T) source.Handler {
	t.Helper()
	select {
	case <-s.ready:
	case <-time.After(5 * time.Second):
		t.Fatal("source not started")
	}
	return s
}

// env is a replica serving gRPC on 127.0.0.1 and a client connected to it.
type env struct {
	t       *testing.T
	src     *pushSource
	replica *Replica
	reg     *prometheus.Registry
	conn    *grpc.ClientConn
	client  pb.DestinationClient
	addr    string
}

func newEnv(t *testing.T, mutate func(*Config)) *env {
	t.Helper()
	cfg := DefaultConfig()
	if mutate != nil {
		mutate(&cfg)
	}
	src := newPushSource()
	reg := prometheus.NewRegistry()
	r, err := NewReplica(cfg, Deps{Source: src, Registerer: reg, Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	lis := testutil.Listen(t)
	serveReplica(t, r, reg, lis)
	conn := testutil.DialGRPC(t, lis.Addr().String())
	src.handler(t)
	return &env{t: t, src: src, replica: r, reg: reg, conn: conn, client: pb.NewDestinationClient(conn), addr: lis.Addr().String()}
}

// serveReplica serves r's Destination API on lis and runs r, the gRPC server and extra (the
// replica's ring, say) until the returned stop is called or the test ends. stop waits for all
// of them, failing the test when they have not ended within 20s; it may be called again.
func serveReplica(t *testing.T, r *Replica, reg prometheus.Registerer, lis net.Listener, extra ...func(context.Context) error) (stop func()) {
	t.Helper()
	gs := grpcserver.New(reg)
	r.Register(gs)
	ctx, cancel := context.WithCancel(context.Background())
	fns := append([]func(context.Context) error{
		r.Run,
		func(ctx context.Context) error { return grpcserver.Serve(ctx, gs, lis, time.Second) },
	}, extra...)
	var wg sync.WaitGroup
	for _, fn := range fns {
		wg.Add(1)
		go func() { defer wg.Done(); _ = fn(ctx) }()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case <-done:
			case <-time.After(20 * time.Second):
				t.Errorf("replica did not stop within 20s")
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// startReplica runs a replica configured by cfg on deps (its Registerer a registry the
// gRPC server's metrics go to as well), serving gRPC on 127.0.0.1 until the test ends, waits
// up to within for it to be ready, and returns it with a client connected to it.
func startReplica(t *testing.T, cfg Config, deps Deps, within time.Duration) (*Replica, pb.DestinationClient) {
	t.Helper()
	r, err := NewReplica(cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	lis := testutil.Listen(t)
	serveReplica(t, r, deps.Registerer, lis)
	testutil.EventuallyNoError(t, within, "the replica to be ready", r.Ready)
	return r, pb.NewDestinationClient(testutil.DialGRPC(t, lis.Addr().String()))
}

func (e *env) h() source.Handler { return e.src.handler(e.t) }

// --- objects ---

func svcObj(ns, name string, ports ...corev1.ServicePort) *corev1.Service {
	if len(ports) == 0 {
		ports = []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt(8080)}}
	}
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.ServiceSpec{Ports: ports}}
}

type epSpec struct {
	ip       string
	pod      string
	ready    bool
	hostname string
}

// sliceObj is the projection of an EndpointSlice of svc with these endpoints, as a source
// delivers it.
func sliceObj(ns, svc, name string, port int32, eps ...epSpec) *translator.EndpointSlice {
	return translator.SlimEndpointSlice(apiSlice(ns, svc, name, port, eps...))
}

// apiSlice is the EndpointSlice of svc with these endpoints.
func apiSlice(ns, svc, name string, port int32, eps ...epSpec) *discoveryv1.EndpointSlice {
	es := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(port)}},
	}
	for _, e := range eps {
		if netip.MustParseAddr(e.ip).Is6() {
			es.AddressType = discoveryv1.AddressTypeIPv6
		}
		ep := discoveryv1.Endpoint{Addresses: []string{e.ip}, Conditions: discoveryv1.EndpointConditions{Ready: ptr(e.ready)}}
		if e.pod != "" {
			ep.TargetRef = &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: e.pod}
		}
		if e.hostname != "" {
			ep.Hostname = ptr(e.hostname)
		}
		es.Endpoints = append(es.Endpoints, ep)
	}
	return es
}

// podObj returns the projection of a pod with the address ip, meshed or not.
func podObj(ns, name, ip string, meshed bool) *translator.Pod {
	return podObjIn(ns, name, ip, meshed, "")
}

// podObjIn is podObj in a phase ("" for none; a pod IP's profile serves the pod's endpoint
// only while it runs).
func podObjIn(ns, name, ip string, meshed bool, phase corev1.PodPhase) *translator.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{}},
		Spec:       corev1.PodSpec{ServiceAccountName: "web"},
		Status:     corev1.PodStatus{Phase: phase, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}}},
	}
	if meshed {
		p.Labels["linkerd.io/control-plane-ns"] = "linkerd"
	}
	return translator.SlimPod(p)
}

func ptr[T any](v T) *T { return &v }

// --- client-side view ---

// held is what a proxy holds after applying updates.
type held struct {
	addrs       map[netip.AddrPort]*pb.WeightedAddr
	noEndpoints *pb.NoEndpoints
	updates     int
}

func (h *held) apply(t *testing.T, u *pb.Update) {
	t.Helper()
	if h.addrs == nil {
		h.addrs = map[netip.AddrPort]*pb.WeightedAddr{}
	}
	h.updates++
	switch v := u.GetUpdate().(type) {
	case *pb.Update_Add:
		h.noEndpoints = nil
		for _, a := range v.Add.GetAddrs() {
			ap, err := wire.ToAddrPort(a.GetAddr())
			if err != nil {
				t.Fatal(err)
			}
			h.addrs[ap] = a
		}
	case *pb.Update_Remove:
		for _, a := range v.Remove.GetAddrs() {
			ap, err := wire.ToAddrPort(a)
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := h.addrs[ap]; !ok {
				t.Fatalf("remove of %s which the client does not hold", ap)
			}
			delete(h.addrs, ap)
		}
	case *pb.Update_NoEndpoints:
		h.noEndpoints = v.NoEndpoints
		clear(h.addrs)
	default:
		t.Fatalf("unknown update %v", u)
	}
}

func (h *held) keys() []string {
	var out []string
	for a := range h.addrs {
		out = append(out, a.String())
	}
	return sortedStrings(out)
}

// stream is a Get stream read by one goroutine (recvStream: next, quiet, end), with room
// for the bursts of the slow-consumer tests.
type stream struct{ *recvStream[pb.Update] }

func newStream(gs pb.Destination_GetClient) *stream {
	return &stream{newRecvStreamSize(gs, 1<<16)}
}

// get opens a Get stream that lives until the test ends.
func get(t *testing.T, e *env, path string) (*stream, context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	s, err := e.client.Get(ctx, &pb.GetDestination{Scheme: "k8s", Path: path})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(cancel)
	return newStream(s), cancel
}

func sortedStrings(s []string) []string {
	slices.Sort(s)
	return s
}

func addrs(u *pb.Update) []string {
	var out []string
	switch v := u.GetUpdate().(type) {
	case *pb.Update_Add:
		for _, a := range v.Add.GetAddrs() {
			ap, _ := wire.ToAddrPort(a.GetAddr())
			out = append(out, ap.String())
		}
	case *pb.Update_Remove:
		for _, a := range v.Remove.GetAddrs() {
			ap, _ := wire.ToAddrPort(a)
			out = append(out, ap.String())
		}
	}
	return sortedStrings(out)
}

func kind(u *pb.Update) string {
	switch v := u.GetUpdate().(type) {
	case *pb.Update_Add:
		return "add"
	case *pb.Update_Remove:
		return "remove"
	case *pb.Update_NoEndpoints:
		return fmt.Sprintf("no_endpoints(exists=%v)", v.NoEndpoints.GetExists())
	}
	return "?"
}

func snapKey(k ServiceKey, port uint32) snapshotKey {
	return snapshotKey{Namespace: k.Namespace, Name: k.Name, Port: port}
}

func allIn(s *snapshotSnapshot, want map[string]bool) bool {
	for _, e := range s.Set.Endpoints {
		if !want[e.Addr.String()] {
			return false
		}
	}
	return true
}

func sameKeys(got []string, want map[string]bool) bool {
	if len(got) != len(want) {
		return false
	}
	for _, k := range got {
		if !want[k] {
			return false
		}
	}
	return true
}

func netipMust(s string) netip.AddrPort { return netip.MustParseAddrPort(s) }
