package shard

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	pb "github.com/linkerd/linkerd2-proxy-api/go/destination"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meridian-mesh/meridian/internal/destclient"
	"github.com/meridian-mesh/meridian/internal/kubetest"
	"github.com/meridian-mesh/meridian/internal/testutil"
	"github.com/meridian-mesh/meridian/shard/source"
)

// kubeRing is a set of services on a real API server, one namespace, each with one slice
// whose endpoints are two addresses of its current version.
type kubeRing struct {
	t   *testing.T
	env *kubetest.Env
	nss []string // service i is in nss[i%len(nss)]
	key ShardKey
	n   int
	// pods: every endpoint names a pod (created before the slice names it, as Kubernetes
	// does), which a replica must know for the endpoint to be served.
	pods    bool
	mu      sync.Mutex
	version map[int]int
	// regs are the metrics registries of the replicas startKubeShard started, by name.
	regs map[string]*prometheus.Registry
}

// addrs are service i's addresses at version v: one the same at every version (so that a
// change never empties the set: Linkerd's deltas remove before they add), one of v.
func (c *kubeRing) addrs(i, v int) []string {
	return []string{fmt.Sprintf("10.%d.0.1", i), fmt.Sprintf("10.%d.%d.2", i, v)}
}

func (c *kubeRing) ns(i int) string { return c.nss[i%len(c.nss)] }

func (c *kubeRing) slice(i, v int) *discoveryv1.EndpointSlice {
	name := fmt.Sprintf("svc%d", i)
	es := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: c.ns(i), Name: name + "-a", Labels: map[string]string{discoveryv1.LabelServiceName: name}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(int32(8080))}},
	}
	for _, a := range c.addrs(i, v) {
		ep := discoveryv1.Endpoint{Addresses: []string{a}, Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)}}
		if c.pods {
			ep.TargetRef = &corev1.ObjectReference{Kind: "Pod", Namespace: c.ns(i), Name: podName(a)}
		}
		es.Endpoints = append(es.Endpoints, ep)
	}
	return es
}

// podName is the name of the pod with address a.
func podName(a string) string { return "pod-" + strings.ReplaceAll(a, ".", "-") }

// createPods creates, when c has pods, those of service i's addresses at version v that do
// not exist yet, running with their address.
func (c *kubeRing) createPods(ctx context.Context, i, v int) {
	c.t.Helper()
	if !c.pods {
		return
	}
	pods := c.env.Client.CoreV1().Pods(c.ns(i))
	for _, a := range c.addrs(i, v) {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: podName(a), Namespace: c.ns(i)},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app"}}}}
		created, err := pods.Create(ctx, p, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			continue
		}
		if err != nil {
			c.t.Fatal(err)
		}
		created.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: a, PodIPs: []corev1.PodIP{{IP: a}}}
		if _, err := pods.UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			c.t.Fatal(err)
		}
	}
}

// newKubeRing creates n services over namespaces fresh namespaces of env.
func newKubeRing(t *testing.T, env *kubetest.Env, key ShardKey, n, namespaces int, pods bool) *kubeRing {
	c := &kubeRing{t: t, env: env, key: key, n: n, pods: pods, version: map[int]int{}}
	for range namespaces {
		c.nss = append(c.nss, env.Namespace(t, nil))
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := range n {
		svc := svcObj(c.ns(i), fmt.Sprintf("svc%d", i))
		if _, err := env.Client.CoreV1().Services(c.ns(i)).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		c.createPods(ctx, i, 0)
		if _, err := env.Client.DiscoveryV1().EndpointSlices(c.ns(i)).Create(ctx, c.slice(i, 0), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// bump moves every service to version v.
func (c *kubeRing) bump(v int) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := range c.n {
		es, err := c.env.Client.DiscoveryV1().EndpointSlices(c.ns(i)).Get(ctx, fmt.Sprintf("svc%d-a", i), metav1.GetOptions{})
		if err != nil {
			c.t.Fatal(err)
		}
		c.createPods(ctx, i, v)
		es.Endpoints = c.slice(i, v).Endpoints
		if _, err := c.env.Client.DiscoveryV1().EndpointSlices(c.ns(i)).Update(ctx, es, metav1.UpdateOptions{}); err != nil {
			c.t.Fatal(err)
		}
		c.mu.Lock()
		c.version[i] = v
		c.mu.Unlock()
	}
}

func (c *kubeRing) truth(i int) string {
	c.mu.Lock()
	v := c.version[i]
	c.mu.Unlock()
	var out []string
	for _, a := range c.addrs(i, v) {
		out = append(out, a+":8080")
	}
	return strings.Join(out, ",")
}

// startKubeShard starts a replica on c's API server. With one namespace it reads that one;
// with more, every namespace.
func startKubeShard(t *testing.T, c *kubeRing, name string, seeds ...string) (*shardNode, *source.Kubernetes) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.ShardKey = c.key
	var src *source.Kubernetes
	n := startRingNode(t, name, cfg, seeds, func(log *zap.Logger, reg prometheus.Registerer) source.Source {
		scfg := source.DefaultKubernetesConfig()
		if len(c.nss) == 1 {
			scfg.Namespace = c.nss[0]
		}
		src = source.NewKubernetes(c.env.Client, scfg, reg, log)
		if r, ok := reg.(*prometheus.Registry); ok {
			if c.regs == nil {
				c.regs = map[string]*prometheus.Registry{}
			}
			c.regs[name] = r
		}
		return src
	})
	return n, src
}

// handoverWatcher follows one service and records whether its set was ever empty after it
// first held endpoints.
type handoverWatcher struct {
	streamWatch
	view    *destclient.View
	full    bool
	emptied bool
	seen    []string // what each update was, for a failure's message
}

func (w *handoverWatcher) keys() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, a := range w.view.Sorted() {
		out = append(out, a.String())
	}
	return strings.Join(out, ",")
}

func watchKube(t *testing.T, ctx context.Context, wg *sync.WaitGroup, c *kubeRing, n *shardNode) []*handoverWatcher {
	client := pb.NewDestinationClient(testutil.DialGRPC(t, n.addr))
	var ws []*handoverWatcher
	for i := range c.n {
		s, err := client.Get(ctx, &pb.GetDestination{Path: fmt.Sprintf("svc%d.%s.svc.cluster.local:80", i, c.ns(i))})
		if err != nil {
			t.Fatal(err)
		}
		w := &handoverWatcher{streamWatch: streamWatch{svc: i}, view: destclient.NewView()}
		read(ctx, wg, &w.streamWatch, s, func(u *pb.Update) error {
			err := w.view.Apply(u)
			w.seen = append(w.seen, fmt.Sprintf("%s%v->%d", kind(u), addrs(u), len(w.view.Sorted())))
			if len(w.view.Sorted()) > 0 {
				w.full = true
			} else if w.full {
				w.emptied = true
			}
			return err
		})
		ws = append(ws, w)
	}
	return ws
}

func waitKubeTruth(t *testing.T, phase string, c *kubeRing, ws []*handoverWatcher) {
	t.Helper()
	testutil.EventuallyNoError(t, 60*time.Second, "every stream to hold the truth", func() error {
		for _, w := range ws {
			if err := w.failure(); err != nil {
				t.Fatalf("service %d: %v", w.svc, err)
			}
			w.mu.Lock()
			emptied, seen := w.emptied, w.seen
			w.mu.Unlock()
			if emptied {
				t.Fatalf("%s: service %d: the stream saw an empty set: %v", phase, w.svc, seen)
			}
			if got, want := w.keys(), c.truth(w.svc); got != want {
				return fmt.Errorf("service %d holds %s, want %s", w.svc, got, want)
			}
		}
		return nil
	})
}

// checkHoldsOwned fails unless each node's index holds exactly the services it owns.
// held returns the number of the ring's services that n holds.
func (c *kubeRing) held(n *shardNode) int {
	held := 0
	for i := range c.n {
		if n.replica.Index().Service(NewServiceKey(c.ns(i), fmt.Sprintf("svc%d", i))) != nil {
			held++
		}
	}
	return held
}

func checkHoldsOwned(t *testing.T, c *kubeRing, nodes []*shardNode) {
	t.Helper()
	testutil.EventuallyNoError(t, 30*time.Second, "each replica to hold exactly what it owns", func() error {
		for _, n := range nodes {
			r := n.cluster.Ring()
			for i := range c.n {
				k := NewServiceKey(c.ns(i), fmt.Sprintf("svc%d", i))
				owns, holds := r.OwnsHash(c.key.hash(k), n.name), n.replica.Index().Service(k) != nil
				if owns != holds {
					return fmt.Errorf("%s: service %d owned %v, held %v", n.name, i, owns, holds)
				}
			}
		}
		return nil
	})
}

// TestKubeRingHandover runs replicas on the Kubernetes source of a real API server: each
// holds only the services it owns; when one joins, it loads its share from the API server
// before the other lets it go, and when it crashes, the other loads it back; streams through
// the first replica follow every change and never see an empty set.
func TestKubeRingHandover(t *testing.T) {
	testKubeRingHandover(t, newKubeRing(t, kubetest.Start(t), ShardByService, 16, 1, false), nil)
}

// TestKubeRingHandoverWithPods is TestKubeRingHandover with a pod behind every endpoint,
// which is served only once its replica knows the pod: each replica keeps exactly the pods it
// needs (those its slices name, and those whose address it owns), reads a pod a slice starts
// naming (each bump names new pods, created before the slice names them and so dropped by
// every replica then), loads its share's pods when it joins, and the other replica's when it
// crashes.
func TestKubeRingHandoverWithPods(t *testing.T) {
	c := newKubeRing(t, kubetest.Start(t), ShardByService, 16, 1, true)
	testKubeRingHandover(t, c, nil, c.checkPods)
}

// checkPods fails unless each replica's source holds exactly the ring's pods it needs: those
// named by the slices of the services it owns (at their current version), and those whose
// address it owns.
func (c *kubeRing) checkPods(t *testing.T, nodes []*shardNode, srcs []*source.Kubernetes) {
	t.Helper()
	testutil.EventuallyNoError(t, 30*time.Second, "each replica to hold exactly the pods it needs", func() error {
		for j, n := range nodes {
			r := n.cluster.Ring()
			held, all := 0, 0
			for i := range c.n {
				owner := r.OwnsHash(c.key.hash(NewServiceKey(c.ns(i), fmt.Sprintf("svc%d", i))), n.name)
				c.mu.Lock()
				cur := c.version[i]
				c.mu.Unlock()
				for v := 0; v <= cur; v++ {
					for k, a := range c.addrs(i, v) {
						if v > 0 && k == 0 {
							continue // the address every version shares
						}
						all++
						named := owner && (k == 0 || v == cur)
						want := named || r.OwnsHash(c.key.hash(ipKey(netip.MustParseAddr(a))), n.name)
						got := srcs[j].Pod(c.ns(i), podName(a)) != nil
						if got != want {
							return fmt.Errorf("%s: pod %s (service %d owned %v): held %v, want %v", n.name, podName(a), i, owner, got, want)
						}
						if got {
							held++
						}
					}
				}
			}
			if len(nodes) > 1 && held == all {
				return fmt.Errorf("%s holds all %d pods", n.name, all)
			}
		}
		return nil
	})
}

// TestKubeRingHandoverByNamespace is TestKubeRingHandover in a ring keyed by namespace, on an
// API server with the ShardedListAndWatch gate (each replica asks it for its namespaces'
// slices only) and on one without (each filters alone).
func TestKubeRingHandoverByNamespace(t *testing.T) {
	for _, gate := range []bool{true, false} {
		t.Run(fmt.Sprintf("gate=%v", gate), func(t *testing.T) {
			opts := kubetest.Options{}
			if gate {
				opts.FeatureGates = "ShardedListAndWatch=true"
			}
			// 16 namespaces, one service each: the chance that one replica owns them all is
			// 2^-15, where with 8 it was high enough to be seen.
			c := newKubeRing(t, kubetest.StartWith(t, opts), ShardByNamespace, 16, 16, false)
			var checks []func(*testing.T, []*shardNode, []*source.Kubernetes)
			if gate {
				checks = append(checks, (&joinerReads{c: c}).check)
			}
			testKubeRingHandover(t, c, func(src *source.Kubernetes) {
				// The joining replica owned everything until it joined; then it asks for its
				// share, and finds out whether the API server shards.
				testutil.Eventually(t, 30*time.Second, "the source to find out whether the API server shards", func() bool {
					return src.ServerSharded() == gate && (gate || strings.Contains(strings.Join(src.Warnings(), ";"), "ShardedListAndWatch"))
				})
			}, checks...)
		})
	}
}

// joinerReads follows what the API server sends the replica that joins a namespace-keyed
// ring: called after each change, it records the slices the joiner has read when it has
// joined, and checks when every slice has changed once since (the bump) that the watch
// brought it the changes of its own namespaces and hardly any other: its shard selector covers
// its share exactly (ShardKey.RingShape places the partitions contiguously; with them
// scattered, a selector of at most 64 ranges asked for 1.8 times a share at 2 replicas).
type joinerReads struct {
	c           *kubeRing
	calls       int
	read, lists float64
}

func (j *joinerReads) check(t *testing.T, nodes []*shardNode, _ []*source.Kubernetes) {
	t.Helper()
	if len(nodes) != 2 {
		return
	}
	j.calls++
	read, lists := j.c.sliceCounters(nodes[1])
	switch j.calls {
	case 1: // joined
		j.read, j.lists = read, lists
	case 2: // bumped: each of the c.n services' slices changed once
		r := nodes[1].cluster.Ring()
		own := 0
		for i := range j.c.n {
			if r.OwnerOfHash(NamespaceHash(j.c.ns(i))).Name == nodes[1].name {
				own++
			}
		}
		got := read - j.read
		t.Logf("%s owns the namespaces of %d of the %d slices that changed, and read %v changes", nodes[1].name, own, j.c.n, got)
		if lists != j.lists {
			t.Logf("%s listed again meanwhile (%v lists): not checked", nodes[1].name, lists-j.lists)
			return
		}
		// A slice of another test's namespace that changed meanwhile may have come in too.
		if got < float64(own) || got > float64(own)+2 {
			t.Errorf("%s read %v changed slices from the API server, want the %d of its namespaces", nodes[1].name, got, own)
		}
	}
}

// sliceCounters returns destination_source_read_objects_total and
// destination_source_lists_total for endpointslices of the replica n started by
// startKubeShard.
func (c *kubeRing) sliceCounters(n *shardNode) (read, lists float64) {
	c.t.Helper()
	get := func(name string) float64 {
		for _, m := range testutil.Gathered(c.t, c.regs[n.name], name) {
			for _, l := range m.GetLabel() {
				if l.GetName() == "resource" && l.GetValue() == "endpointslices" {
					return m.GetCounter().GetValue()
				}
			}
		}
		c.t.Fatalf("%s: no %s{resource=endpointslices}", n.name, name)
		return 0
	}
	return get("destination_source_read_objects_total"), get("destination_source_lists_total")
}

// testKubeRingHandover runs the handover; check, if set, looks at the joining replica's
// source, and checkSources, if set, at every replica's after each change.
func testKubeRingHandover(t *testing.T, c *kubeRing, check func(*source.Kubernetes), checkSources ...func(*testing.T, []*shardNode, []*source.Kubernetes)) {
	checkAll := func(nodes []*shardNode, srcs []*source.Kubernetes) {
		for _, f := range checkSources {
			f(t, nodes, srcs)
		}
	}
	r0, src0 := startKubeShard(t, c, "k0")
	waitConverged(t, []*shardNode{r0}, 1)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	ws := watchKube(t, ctx, &wg, c, r0)
	waitKubeTruth(t, "first", c, ws)
	checkAll([]*shardNode{r0}, []*source.Kubernetes{src0})

	r1, src1 := startKubeShard(t, c, "k1", r0.gossip())
	nodes := []*shardNode{r0, r1}
	waitConverged(t, nodes, 2)
	checkHoldsOwned(t, c, nodes)
	// Each holds a share of the test's services (Index().Len() would count the API server's
	// other services too).
	if h0, h1 := c.held(r0), c.held(r1); h0 == 0 || h1 == 0 {
		t.Fatalf("k0 holds %d and k1 %d of the %d services", h0, h1, c.n)
	}
	if check != nil {
		check(src1)
	}
	waitKubeTruth(t, "joined", c, ws)
	checkAll(nodes, []*source.Kubernetes{src0, src1})
	c.bump(1)
	waitKubeTruth(t, "bumped", c, ws)
	checkAll(nodes, []*source.Kubernetes{src0, src1})

	// k1 crashes: k0 loads its share back from the API server.
	_ = r1.cluster.Close()
	r1.stop()
	start := time.Now()
	testutil.Eventually(t, 30*time.Second, "k0 to drop k1", func() bool { return r0.cluster.Ring().Len() == 1 })
	waitConverged(t, nodes[:1], 1)
	t.Logf("k0 took over k1's share %v after k1 crashed (failure detection included)", time.Since(start))
	checkHoldsOwned(t, c, nodes[:1])
	waitKubeTruth(t, "took over", c, ws)
	checkAll(nodes[:1], []*source.Kubernetes{src0})
	c.bump(2)
	waitKubeTruth(t, "bumped again", c, ws)
	checkAll(nodes[:1], []*source.Kubernetes{src0})
}
