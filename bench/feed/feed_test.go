package feed

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"reflect"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meridian-mesh/meridian/bench/gen"
	"github.com/meridian-mesh/meridian/translator"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func smallConfig() gen.Config {
	c := gen.DefaultConfig()
	c.Services, c.EndpointsPerService, c.Namespaces = 20, 150, 4
	return c
}

func TestFrameRoundTrip(t *testing.T) {
	cfg := smallConfig()
	c, _ := gen.NewCluster(cfg)
	svc := cfg.Service(3)
	es := c.EndpointSlice(3, 1)
	var buf []byte
	buf = AppendHello(buf, Hello{Subscriber: 7, Cluster: cfg, DeliverPods: true})
	buf, _ = AppendService(buf, svc, false)
	buf, _ = AppendEndpointSlice(buf, es, false)
	buf, _ = AppendEndpointSlice(buf, es, true)
	buf, _ = AppendService(buf, svc, true)
	buf = AppendFrame(buf, FrameSynced, nil)
	buf = AppendReplayDone(buf, 1<<40)

	r := NewReader(bytes.NewReader(buf))
	var evs []Event
	for {
		ft, p, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		ev, err := Decode(ft, p)
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
	}
	want := []FrameType{FrameHello, FrameService, FrameEndpointSlice, FrameEndpointSliceDeleted, FrameServiceDeleted, FrameSynced, FrameReplayDone}
	if len(evs) != len(want) {
		t.Fatalf("%d events, want %d", len(evs), len(want))
	}
	for i, ev := range evs {
		if ev.Type != want[i] {
			t.Errorf("event %d is %s, want %s", i, ev.Type, want[i])
		}
	}
	if evs[0].Hello.Subscriber != 7 || evs[0].Hello.Cluster != cfg || !evs[0].Hello.DeliverPods {
		t.Errorf("hello %+v", evs[0].Hello)
	}
	// TypeMeta does not travel in Kubernetes protobuf; compare the rest. Slices arrive slim.
	svc.TypeMeta, es.TypeMeta = evs[1].Service.TypeMeta, evs[2].EndpointSlice.TypeMeta
	if !reflect.DeepEqual(evs[1].Service, svc) {
		t.Errorf("service:\n got %+v\nwant %+v", evs[1].Service, svc)
	}
	if want := translator.SlimEndpointSlice(es); !reflect.DeepEqual(evs[2].EndpointSlice, want) {
		t.Errorf("slice after the round trip:\n got %+v\nwant %+v", evs[2].EndpointSlice, want)
	}
	if evs[6].Token != 1<<40 {
		t.Errorf("token %d", evs[6].Token)
	}
}

func TestFrameErrors(t *testing.T) {
	cfg := smallConfig()
	good, _ := AppendService(nil, cfg.Service(1), false)
	for _, tc := range []struct {
		name string
		in   []byte
	}{
		{"truncated payload", good[:len(good)-3]},
		{"truncated length", []byte{byte(FrameService), 0x80}},
		{"oversize", AppendFrame(nil, FrameService, nil)[:1:1]},
	} {
		in := tc.in
		if tc.name == "oversize" {
			in = append([]byte{byte(FrameService)}, 0xff, 0xff, 0xff, 0xff, 0x0f)
		}
		if _, _, err := NewReader(bytes.NewReader(in)).Next(); err == nil || errors.Is(err, io.EOF) {
			t.Errorf("%s: err %v", tc.name, err)
		}
	}
	for _, tc := range []struct {
		t FrameType
		p []byte
	}{
		{FrameService, []byte{0xff}},
		{FrameService, nil}, // no name
		{FrameEndpointSlice, nil},
		{FrameHello, []byte("{")},
		{FrameHello, []byte(`{"cluster":{}}`)},
		{FrameSynced, []byte{1}},
		{FrameReplayDone, nil},
		{99, nil},
	} {
		if _, err := Decode(tc.t, tc.p); err == nil {
			t.Errorf("Decode(%s, %x): no error", tc.t, tc.p)
		}
	}
}

// recorder is a source.Handler keeping what it was given.
type recorder struct {
	mu       sync.Mutex
	services map[string]*corev1.Service
	slices   map[string]*translator.EndpointSlice
	pods     int
	// sliceDeliveries counts the slices delivered, by service name.
	sliceDeliveries map[string]int
	// want, when set, is the recorder's source.ServiceFilter: it keeps only those slices.
	want func(namespace, service string) bool
}

// WantsService implements source.ServiceFilter.
func (r *recorder) WantsService(namespace, service string) bool {
	return r.want == nil || r.want(namespace, service)
}

func newRecorder() *recorder {
	return &recorder{services: map[string]*corev1.Service{}, slices: map[string]*translator.EndpointSlice{}, sliceDeliveries: map[string]int{}}
}

func (r *recorder) OnService(s *corev1.Service, deleted bool) { keep(&r.mu, r.services, s, deleted) }

func (r *recorder) OnEndpointSlice(es *translator.EndpointSlice, deleted bool) {
	keep(&r.mu, r.slices, es, deleted)
	r.mu.Lock()
	r.sliceDeliveries[es.Service]++
	r.mu.Unlock()
}

// keep records o in m under "namespace/name", or removes it when deleted, holding mu.
func keep[T metav1.Object](mu *sync.Mutex, m map[string]T, o T, deleted bool) {
	mu.Lock()
	defer mu.Unlock()
	if deleted {
		delete(m, o.GetNamespace()+"/"+o.GetName())
	} else {
		m[o.GetNamespace()+"/"+o.GetName()] = o
	}
}

func (r *recorder) OnPod(*translator.Pod, bool) {
	r.mu.Lock()
	r.pods++
	r.mu.Unlock()
}

// matches reports whether r holds exactly the truth's slices.
func (r *recorder) matches(c *gen.Cluster) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for i := range c.Services() {
		if r.services[c.Config().Namespace(i)+"/"+gen.ServiceName(i)] == nil {
			return false
		}
		if !r.WantsService(c.Config().Namespace(i), gen.ServiceName(i)) {
			continue
		}
		for k := range c.Slices(i) {
			n++
			// Slices arrive slim: their ready endpoints only, in order.
			es := r.slices[c.Config().Namespace(i)+"/"+gen.SliceName(i, k)]
			if es == nil {
				return false
			}
			j := 0
			for _, e := range c.Endpoints(i, k) {
				if !e.Ready {
					continue
				}
				if j >= len(es.Endpoints) || es.Endpoints[j].Addr(es) != gen.SerialAddr(e.Serial) {
					return false
				}
				j++
			}
			if j != len(es.Endpoints) {
				return false
			}
		}
	}
	return n == len(r.slices)
}

type fixture struct {
	srv    *Server
	src    *Source
	rec    *recorder
	cancel context.CancelFunc
	wg     sync.WaitGroup
	runErr error
}

func start(t *testing.T, scfg ServerConfig) *fixture { return startFiltered(t, scfg, nil) }

// startFiltered starts a fixture whose recorder wants the slices of the services want
// accepts (nil: all).
func startFiltered(t *testing.T, scfg ServerConfig, want func(namespace, service string) bool) *fixture {
	t.Helper()
	cl, err := gen.NewCluster(smallConfig())
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{srv: NewServer(cl, scfg, zaptest.NewLogger(t)), rec: newRecorder()}
	f.rec.want = want
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	f.cancel = cancel
	f.src = NewSource(lis.Addr().String(), zaptest.NewLogger(t))
	f.wg.Add(2)
	go func() { defer f.wg.Done(); _ = f.srv.Serve(ctx, lis) }()
	go func() { defer f.wg.Done(); f.runErr = f.src.Run(ctx, f.rec) }()
	t.Cleanup(func() {
		cancel()
		done := make(chan struct{})
		go func() { f.wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("server or source did not stop")
		}
		if f.runErr != nil {
			t.Errorf("Run: %v", f.runErr)
		}
	})
	return f
}

func (f *fixture) converged(t *testing.T, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ok := false
		f.srv.Read(func(c *gen.Cluster) { ok = f.src.Synced() && f.rec.matches(c) })
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: the handler's objects did not converge to the truth", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// churn applies n random changes to the served cluster, from a generator seeded with seed.
func (f *fixture) churn(t *testing.T, seed uint64, n int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, seed+1))
	for range n {
		if _, _, err := f.srv.Apply(rng, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
}

func TestServeAndChurn(t *testing.T) {
	f := start(t, DefaultServerConfig())
	f.converged(t, "initial state")
	if p := f.src.Pod("ns-1", smallConfig().PodName(1, 200)); p == nil || len(p.IPs()) != 1 || p.IPs()[0] != gen.SerialAddr(200) {
		t.Fatalf("Pod lookup: %v", p)
	}
	// A pod derived from its shape's is the projection of the pod gen synthesizes, for pods
	// of a shape seen before and not, meshed and not.
	cfg := smallConfig()
	for _, serial := range []uint32{200, 201, 202, 203, 300, 200} {
		name := cfg.PodName(1, serial)
		if got, want := f.src.Pod("ns-1", name), translator.SlimPod(gen.Pod(cfg, "ns-1", name)); !reflect.DeepEqual(got, want) {
			t.Fatalf("Pod(%s) = %+v, want %+v", name, got, want)
		}
	}
	if p := f.src.Pod("ns-1", "not-a-pod"); p != nil {
		t.Fatalf("Pod of an unknown name: %+v", p)
	}
	f.churn(t, 1, 300)
	f.converged(t, "after churn")
	if f.rec.pods != 0 {
		t.Errorf("%d pods delivered without DeliverPods", f.rec.pods)
	}

	// Replay re-delivers everything: clear the recorder and replay.
	f.rec.mu.Lock()
	clear(f.rec.slices)
	clear(f.rec.services)
	f.rec.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := f.src.Replay(ctx); err != nil {
		t.Fatal(err)
	}
	ok := false
	f.srv.Read(func(c *gen.Cluster) { ok = f.rec.matches(c) })
	if !ok {
		t.Fatal("state after Replay returned differs from the truth")
	}
}

func TestOverflowResyncs(t *testing.T) {
	f := start(t, ServerConfig{QueueFrames: 1, DeliverPods: true})
	f.converged(t, "initial state")
	f.churn(t, 3, 200)
	f.converged(t, "after a burst through a one-frame queue")
	if f.srv.Resyncs() == 0 {
		t.Error("no resync counted")
	}
	f.rec.mu.Lock()
	pods := f.rec.pods
	f.rec.mu.Unlock()
	if pods == 0 {
		t.Error("DeliverPods delivered no pods")
	}
}

func TestReplayErrors(t *testing.T) {
	src := NewSource("127.0.0.1:1", nil)
	if err := src.Replay(context.Background()); err == nil {
		t.Error("replay before connecting: no error")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := src.Run(ctx, newRecorder()); err == nil {
		t.Error("Run against a closed port: no error")
	}
	if err := src.Run(ctx, newRecorder()); err == nil {
		t.Error("second Run: no error")
	}
}

func FuzzDecode(f *testing.F) {
	cfg := smallConfig()
	c, _ := gen.NewCluster(cfg)
	seed := AppendHello(nil, Hello{Subscriber: 1, Cluster: cfg})
	seed, _ = AppendService(seed, cfg.Service(0), false)
	seed, _ = AppendEndpointSlice(seed, c.EndpointSlice(0, 0), false)
	seed = AppendFrame(seed, FrameSynced, nil)
	seed = AppendReplayDone(seed, 3)
	f.Add(seed)
	f.Add([]byte{byte(FrameEndpointSlice), 3, 0x0a, 0x01, 0x00})
	f.Add([]byte{byte(FrameHello), 2, '{', '}'})
	f.Fuzz(func(t *testing.T, in []byte) {
		r := NewReader(bytes.NewReader(in))
		for range 1000 {
			ft, p, err := r.Next()
			if err != nil {
				return
			}
			ev, err := Decode(ft, p)
			if err != nil {
				continue
			}
			if ev.Type != ft {
				t.Fatalf("event type %s from frame %s", ev.Type, ft)
			}
			switch ft {
			case FrameService, FrameServiceDeleted:
				if ev.Service == nil {
					t.Fatal("service frame without service")
				}
			case FrameEndpointSlice, FrameEndpointSliceDeleted:
				if ev.EndpointSlice == nil {
					t.Fatal("slice frame without slice")
				}
			case FrameHello:
				if ev.Hello == nil {
					t.Fatal("hello without hello")
				}
			}
		}
	})
}

func BenchmarkEncodeSlice(b *testing.B) {
	cfg := smallConfig()
	c, _ := gen.NewCluster(cfg)
	es := c.EndpointSlice(0, 0)
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		buf, _ = AppendEndpointSlice(buf[:0], es, false)
	}
	b.SetBytes(int64(len(buf)))
}

func BenchmarkDecodeSlice(b *testing.B) {
	cfg := smallConfig()
	c, _ := gen.NewCluster(cfg)
	buf, _ := AppendEndpointSlice(nil, c.EndpointSlice(0, 0), false)
	r := NewReader(bytes.NewReader(buf))
	ft, payload, _ := r.Next()
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Decode(ft, payload); err != nil {
			b.Fatal(err)
		}
	}
}

// TestServiceFilter: a handler that wants some services gets every Service but only their
// slices, through churn.
func TestServiceFilter(t *testing.T) {
	f := startFiltered(t, DefaultServerConfig(), func(_, svc string) bool { return svc == gen.ServiceName(1) || svc == gen.ServiceName(2) })
	f.converged(t, "initial state")
	f.churn(t, 3, 300)
	f.converged(t, "after churn")
	f.rec.mu.Lock()
	defer f.rec.mu.Unlock()
	if len(f.rec.services) != smallConfig().Services {
		t.Errorf("%d services delivered, want all %d", len(f.rec.services), smallConfig().Services)
	}
	for k, es := range f.rec.slices {
		if svc := es.Service; svc != gen.ServiceName(1) && svc != gen.ServiceName(2) {
			t.Errorf("slice %s of unwanted service %s delivered", k, svc)
		}
	}
	if len(f.rec.slices) != 4 { // 150 endpoints each: two slices per service
		t.Errorf("%d slices delivered, want 4", len(f.rec.slices))
	}
}
