package shard

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meridian-mesh/meridian/internal/kubetest"
	"github.com/meridian-mesh/meridian/internal/testutil"
	"github.com/meridian-mesh/meridian/ring"
	"github.com/meridian-mesh/meridian/shard/source"
)

// BenchmarkKubeShareHeap reports the live heap of a replica on the Kubernetes source of a
// real API server holding 500 (headless) Services of one 100-endpoint slice each: alone (it owns
// everything) and as one shard of a ring of 4, without streams: of the ring from the start, and
// after the ring grew from the replica alone (at once, one member at a time, or while the first
// list was read), which must release what the replica no longer owns. Run it with
// -bench KubeShareHeap -benchtime 1x.
func BenchmarkKubeShareHeap(b *testing.B) {
	env := kubetest.Start(b)
	ns := env.Namespace(b, nil)
	const services, endpoints = 500, 100
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, services)
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < services; i += 8 {
				name := fmt.Sprintf("svc%d", i)
				svc := svcObj(ns, name)
				svc.Spec.ClusterIP = corev1.ClusterIPNone // the test API server has 256 cluster IPs
				if _, err := env.Client.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
					errs <- err
					return
				}
				es := &discoveryv1.EndpointSlice{
					ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: name + "-a", Labels: map[string]string{discoveryv1.LabelServiceName: name}},
					AddressType: discoveryv1.AddressTypeIPv4,
					Ports:       []discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(int32(8080))}},
				}
				for e := range endpoints {
					es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.%d.%d.%d", i/250, i%250, e+1)},
						Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)}, NodeName: ptr("node-1"), Zone: ptr("zone-a")})
				}
				if _, err := env.Client.DiscoveryV1().EndpointSlices(ns).Create(ctx, es, metav1.CreateOptions{}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	var ms []ring.Member
	for i := range 4 {
		ms = append(ms, ring.Member{Name: fmt.Sprintf("r%d", i)})
	}
	r4 := ring.Build(ms, ring.DefaultHashConfig())
	for _, tc := range []struct {
		name    string
		members Membership
		grow    *movingMembership
		early   bool // the ring moves while the first list is read
	}{{"replicas=1", nil, nil, false}, {"shard-of-4", staticMembership{r4, ms[0]}, nil, false}, {"alone-then-4", nil, newMovingMembership(ms[0], r4), false}, {"joins-2-3-4", nil, newMovingMembership(ms[0], ring.Build(ms[:2], ring.DefaultHashConfig()), ring.Build(ms[:3], ring.DefaultHashConfig()), r4), false}, {"last-of-4-joins", nil, newMovingMembership(ms[3], r4), false}, {"moves-during-list", nil, newMovingMembership(ms[0], r4), true}} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				before := liveHeap()
				src := source.NewKubernetes(env.Client, source.KubernetesConfig{Namespace: ns}, nil, nil)
				members := tc.members
				if tc.grow != nil {
					members = tc.grow
				}
				r, err := NewReplica(DefaultConfig(), Deps{Source: src, Membership: members})
				if err != nil {
					b.Fatal(err)
				}
				rctx, stop := context.WithCancel(context.Background())
				done := make(chan error, 1)
				go func() { done <- r.Run(rctx) }()
				if tc.early {
					testutil.Eventually(b, time.Minute, "the first list to start", func() bool { return r.Index().Len() > 0 })
					tc.grow.move()
				}
				testutil.Eventually(b, 5*time.Minute, "the replica to sync", func() bool { return r.Ready() == nil && r.Index().Len() > 0 })
				r.Index().settle(rctx)
				if tc.grow != nil {
					for tc.grow.move() {
						want := tc.grow.owned(ns, services)
						testutil.Eventually(b, time.Minute, "the replica to follow the ring", func() bool { return r.Index().Len() <= want+1 && r.Index().Len() >= want })
						r.Index().settle(rctx)
					}
				}
				after := liveHeap()
				b.ReportMetric(float64(after-before)/(1<<20), "MiB-heap")
				b.ReportMetric(float64(r.Index().Len()), "services")
				stop()
				if err := <-done; err != nil {
					b.Fatal(err)
				}
				runtime.KeepAlive(r)
			}
		})
	}
}

func liveHeap() int64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// movingMembership is a ring of self alone until move, then each ring given in turn.
type movingMembership struct {
	self ring.Member
	next []*ring.Ring
	mu   sync.Mutex
	cur  *ring.Ring
	ch   chan struct{}
}

func newMovingMembership(self ring.Member, next ...*ring.Ring) *movingMembership {
	return &movingMembership{self: self, next: next, cur: ring.Build([]ring.Member{self}, ring.DefaultHashConfig()), ch: make(chan struct{}, 1)}
}

func (m *movingMembership) Ring() *ring.Ring {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cur
}
func (m *movingMembership) Self() ring.Member                    { return m.self }
func (m *movingMembership) Subscribe() (<-chan struct{}, func()) { return m.ch, func() {} }
func (m *movingMembership) Joined() bool                         { return true }
func (m *movingMembership) Settled() bool                        { return true }

// move moves to the next ring, and reports false when there is none.
func (m *movingMembership) move() bool {
	if len(m.next) == 0 {
		return false
	}
	m.mu.Lock()
	m.cur, m.next = m.next[0], m.next[1:]
	m.mu.Unlock()
	m.ch <- struct{}{}
	return true
}

// owned returns how many of the benchmark's services the current ring gives self.
func (m *movingMembership) owned(ns string, services int) int {
	r := m.Ring()
	n := 0
	for i := range services {
		if r.OwnsHash(ShardByService.hash(NewServiceKey(ns, fmt.Sprintf("svc%d", i))), m.self.Name) {
			n++
		}
	}
	return n
}
