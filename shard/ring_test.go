package shard

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	pb "github.com/linkerd/linkerd2-proxy-api/go/destination"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/meridian-mesh/meridian/internal/destclient"
	"github.com/meridian-mesh/meridian/internal/testutil"
	"github.com/meridian-mesh/meridian/ring"
	"github.com/meridian-mesh/meridian/shard/source"
)

// cluster is a directory of Kubernetes YAML that every replica reads (the local directory
// source), with the truth of each service's ready addresses.
type cluster struct {
	t   *testing.T
	dir string
	mu  sync.Mutex
	// version of each service: its endpoints are the addresses of ids [v, v+width).
	version map[int]int
	width   int
}

func newCluster(t *testing.T, services, width int) *cluster {
	c := &cluster{t: t, dir: t.TempDir(), version: map[int]int{}, width: width}
	for i := range services {
		c.write(i, 0)
	}
	return c
}

func svcName(i int) (ns, name string) { return fmt.Sprintf("ns%d", i%3), fmt.Sprintf("svc%d", i) }

func addrOf(i, id int) string { return fmt.Sprintf("10.%d.%d.%d", i/250, i%250, id%250+1) }

// write replaces service i's file atomically with its endpoints at version v.
func (c *cluster) write(i, v int) {
	c.t.Helper()
	ns, name := svcName(i)
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: v1\nkind: Service\nmetadata: {namespace: %s, name: %s}\nspec:\n  ports: [{name: http, port: 80, targetPort: 8080}]\n", ns, name)
	fmt.Fprintf(&b, "---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {namespace: %s, name: %s-a, labels: {kubernetes.io/service-name: %s}}\naddressType: IPv4\nports: [{name: http, port: 8080}]\nendpoints:\n", ns, name, name)
	for id := v; id < v+c.width; id++ {
		fmt.Fprintf(&b, "- addresses: [%q]\n  conditions: {ready: true}\n", addrOf(i, id))
	}
	tmp := filepath.Join(c.dir, fmt.Sprintf(".svc%d.tmp", i))
	if err := os.WriteFile(tmp, []byte(b.String()), 0o644); err != nil {
		c.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(c.dir, fmt.Sprintf("svc%d.yaml", i))); err != nil {
		c.t.Fatal(err)
	}
	c.mu.Lock()
	c.version[i] = v
	c.mu.Unlock()
}

func (c *cluster) truth(i int) []string {
	c.mu.Lock()
	v := c.version[i]
	c.mu.Unlock()
	var out []string
	for id := v; id < v+c.width; id++ {
		out = append(out, addrOf(i, id)+":8080")
	}
	sort.Strings(out)
	return out
}

// testGossipKey encrypts the test rings' gossip, as a key must outside tests.
var testGossipKey = []byte("meridian shard test gossip key!!")

// shardNode is one replica: a memberlist node, a Replica on the directory, a gRPC server.
type shardNode struct {
	name    string
	cluster *ring.Cluster
	replica *Replica
	addr    string
	stop    func() // stops the node and waits for it (crashes it: no graceful leave)
	// dialOpts are added to the test's dials of addr (a dialer into a network namespace).
	dialOpts []grpc.DialOption
}

func startShard(t *testing.T, c *cluster, name string, mode NonOwnerMode, seeds ...string) *shardNode {
	t.Helper()
	cfg := DefaultConfig()
	cfg.NonOwner = mode
	return startRingNode(t, name, cfg, seeds, func(log *zap.Logger, _ prometheus.Registerer) source.Source {
		dcfg := source.DefaultDirConfig(c.dir)
		dcfg.Rescan = 200 * time.Millisecond
		return source.NewDirWithConfig(dcfg, log)
	})
}

// startRingNode starts the ring member name (joining seeds, with fast timings) and a replica
// configured by cfg on the source newSource makes (given the node's logger and the registry
// of the replica's metrics), serving gRPC on 127.0.0.1 until the node is stopped.
func startRingNode(t *testing.T, name string, cfg Config, seeds []string, newSource func(*zap.Logger, prometheus.Registerer) source.Source) *shardNode {
	t.Helper()
	return startRingNodeWith(t, name, cfg, seeds, func(log *zap.Logger, reg prometheus.Registerer, _ Membership) source.Source {
		return newSource(log, reg)
	}, nil)
}

// startRingNodeWith is startRingNode with the ring's config adjusted by ringMod (when not
// nil) and newSource given the node's membership too.
func startRingNodeWith(t *testing.T, name string, cfg Config, seeds []string,
	newSource func(*zap.Logger, prometheus.Registerer, Membership) source.Source, ringMod func(*ring.Config)) *shardNode {
	t.Helper()
	lis := testutil.Listen(t)
	log := zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)).Named(name)
	rc := ring.DefaultConfig()
	rc.NodeName, rc.GossipAddr, rc.GRPCAddr, rc.Join, rc.Fast, rc.Logger = name, "127.0.0.1:0", lis.Addr().String(), seeds, true, log
	rc.Hash = cfg.ShardKey.RingShape()
	rc.GossipKey = testGossipKey
	rc.Registerer = prometheus.NewRegistry()
	if ringMod != nil {
		ringMod(&rc)
	}
	members, err := ring.New(rc)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	r, err := NewReplica(cfg, Deps{Source: newSource(log, reg, members), Membership: members, Registerer: reg, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	n := &shardNode{name: name, cluster: members, replica: r, addr: lis.Addr().String()}
	n.stop = serveReplica(t, r, reg, lis, members.Run)
	return n
}

func (n *shardNode) gossip() string { return n.cluster.GossipAddr() }

// waitConverged waits until every node sees the same ring of want members and is ready.
func waitConverged(t *testing.T, nodes []*shardNode, want int) {
	t.Helper()
	testutil.EventuallyNoError(t, 30*time.Second, fmt.Sprintf("a ring of %d to converge", want), func() error {
		id := nodes[0].cluster.Ring().ID()
		for _, n := range nodes {
			r := n.cluster.Ring()
			switch {
			case r.Len() != want || r.ID() != id:
				return fmt.Errorf("%s sees %d members, ring %016x (want %016x)", n.name, r.Len(), r.ID(), id)
			case n.replica.Ready() != nil:
				return fmt.Errorf("%s not ready: %w", n.name, n.replica.Ready())
			case n.replica.own.load().ring.ID() != id:
				return fmt.Errorf("%s serves by ring %016x", n.name, n.replica.own.load().ring.ID())
			}
		}
		return nil
	})
}

const ringServices = 30

func startRing(t *testing.T, c *cluster, n int, mode NonOwnerMode) []*shardNode {
	nodes := []*shardNode{startShard(t, c, "r0", mode)}
	for i := 1; i < n; i++ {
		nodes = append(nodes, startShard(t, c, fmt.Sprintf("r%d", i), mode, nodes[0].gossip()))
	}
	waitConverged(t, nodes, n)
	return nodes
}

func TestRingEachServiceOneOwnerAnyReplicaAnswers(t *testing.T) {
	c := newCluster(t, ringServices, 3)
	nodes := startRing(t, c, 3, Forward)
	// Each service is held by exactly one replica, and the ring agrees on which (looked up by
	// the "namespace/name" string, as other callers of the ring do).
	testutil.EventuallyNoError(t, 20*time.Second, "every service held by exactly its owner", func() error {
		held, ok := 0, true
		for i := range ringServices {
			ns, name := svcName(i)
			k := NewServiceKey(ns, name)
			holders := 0
			for _, n := range nodes {
				if n.replica.Index().Service(k) != nil {
					holders++
					if n.cluster.Ring().Owner(k.String()).Name != n.name {
						ok = false
					}
				}
			}
			if holders != 1 {
				ok = false
			}
			held += holders
		}
		if !ok {
			return fmt.Errorf("%d holdings for %d services", held, ringServices)
		}
		return nil
	})
	for _, n := range nodes {
		t.Logf("%s owns %d of %d services", n.name, n.replica.Index().Len(), ringServices)
	}
	// Any replica answers for any service, with the owner's endpoints.
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	ws := watchAll(t, ctx, &wg, nodes)
	ps := watchProfiles(t, ctx, &wg, nodes)
	waitTruth(t, c, ws, 20*time.Second)
	waitProfiles(t, ps)
	// An unknown service is NotFound through any replica.
	for _, n := range nodes {
		s, _ := pb.NewDestinationClient(testutil.DialGRPC(t, n.addr)).Get(ctx, &pb.GetDestination{Path: "nope.ns0.svc.cluster.local:80"})
		if _, err := s.Recv(); status.Code(err) != codes.NotFound {
			t.Fatalf("%s: unknown service gave %v", n.name, err)
		}
		p, _ := pb.NewDestinationClient(testutil.DialGRPC(t, n.addr)).GetProfile(ctx, &pb.GetDestination{Path: "nope.ns0.svc.cluster.local:80"})
		if _, err := p.Recv(); status.Code(err) != codes.NotFound {
			t.Fatalf("%s: profile of an unknown service gave %v", n.name, err)
		}
	}
}

// churner rewrites one service's endpoints every 20ms, round robin, for at most 1000 steps.
type churner struct {
	steps  atomic.Int64
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func startChurn(ctx context.Context, c *cluster) *churner {
	ctx, cancel := context.WithCancel(ctx)
	ch := &churner{cancel: cancel}
	ch.wg.Add(1)
	go func() {
		defer ch.wg.Done()
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for step := 1; step <= 1000; step++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			i := step % ringServices
			c.mu.Lock()
			v := c.version[i] + 1
			c.mu.Unlock()
			c.write(i, v)
			ch.steps.Add(1)
		}
	}()
	return ch
}

// waitSteps waits until the churn has made n more changes.
func (ch *churner) waitSteps(t *testing.T, n int64) {
	t.Helper()
	target := ch.steps.Load() + n
	testutil.Eventually(t, 20*time.Second, fmt.Sprintf("%d more changes", n), func() bool { return ch.steps.Load() >= target })
}

func (ch *churner) stop() {
	ch.cancel()
	ch.wg.Wait()
}

func TestRingReplicaKilledUnderChurn(t *testing.T) {
	c := newCluster(t, ringServices, 4)
	nodes := startRing(t, c, 4, Forward)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	// Streams on the replicas that survive, for every service.
	ws := watchAll(t, ctx, &wg, nodes[:3])
	waitTruth(t, c, ws, 20*time.Second)
	ch := startChurn(ctx, c)
	ch.waitSteps(t, 15)
	// Crash the fourth replica: no graceful leave; memberlist detects it. The churn goes on
	// while the survivors detect the failure and take its services over.
	killed := nodes[3]
	_ = killed.cluster.Close()
	killed.stop()
	testutil.Eventually(t, 30*time.Second, "the survivors to drop the crashed replica", func() bool {
		for _, n := range nodes[:3] {
			if _, ok := n.cluster.Ring().Member(killed.name); ok {
				return false
			}
		}
		return true
	})
	ch.waitSteps(t, 15)
	ch.stop()
	waitConverged(t, nodes[:3], 3)
	waitTruth(t, c, ws, 30*time.Second)
	// And the streams keep following changes.
	c.write(1, 500)
	waitTruth(t, c, ws, 20*time.Second)
}

func TestRingJoinMovesStreamsWithoutLoss(t *testing.T) {
	c := newCluster(t, ringServices, 4)
	nodes := startRing(t, c, 3, Forward)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	ws := watchAll(t, ctx, &wg, nodes)
	ps := watchProfiles(t, ctx, &wg, nodes)
	clients := slices.Clone(nodes)
	waitTruth(t, c, ws, 20*time.Second)
	waitProfiles(t, ps)
	waitRelayed(t, nodes, clients, 2)
	before := map[string]int{}
	for _, n := range nodes {
		before[n.name] = n.replica.Index().Len()
	}
	ch := startChurn(ctx, c)
	joined := startShard(t, c, "r3", Forward, nodes[0].gossip())
	nodes = append(nodes, joined)
	waitConverged(t, nodes, 4)
	ch.waitSteps(t, 25) // the churn goes on after the handover
	ch.stop()
	waitTruth(t, c, ws, 30*time.Second)
	// Get and GetProfile streams alike moved: each replica relays exactly the streams of the
	// services it does not own now, and no profile stream ended or repeated its profile.
	waitRelayed(t, nodes, clients, 2)
	waitProfiles(t, ps)
	if joined.replica.Index().Len() == 0 {
		t.Fatal("the new replica owns no service")
	}
	for _, n := range nodes {
		t.Logf("%s: owned %d before, %d after", n.name, before[n.name], n.replica.Index().Len())
	}
	// Streams moved to the new owner keep receiving deltas.
	for i := range ringServices {
		c.write(i, 700+i)
	}
	waitTruth(t, c, ws, 20*time.Second)
}

func TestRingRedirect(t *testing.T) {
	c := newCluster(t, ringServices, 2)
	nodes := startRing(t, c, 3, Redirect)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	redirected := 0
	for i := range ringServices {
		path := servicePath(i)
		s, err := pb.NewDestinationClient(testutil.DialGRPC(t, nodes[0].addr)).Get(ctx, &pb.GetDestination{Path: path})
		if err != nil {
			t.Fatal(err)
		}
		u, err := s.Recv()
		if err == nil {
			if got := addrs(u); strings.Join(got, ",") != strings.Join(c.truth(i), ",") {
				t.Fatalf("owner answered %v", got)
			}
			continue
		}
		redirected++
		owner := s.Trailer().Get(destclient.OwnerTrailer)
		if status.Code(err) != codes.FailedPrecondition || len(owner) != 1 || !strings.Contains(err.Error(), owner[0]) {
			t.Fatalf("redirect: %v, trailer %v", err, owner)
		}
		s2, err := pb.NewDestinationClient(testutil.DialGRPC(t, owner[0])).Get(ctx, &pb.GetDestination{Path: path})
		if err != nil {
			t.Fatal(err)
		}
		u, err = s2.Recv()
		if err != nil || strings.Join(addrs(u), ",") != strings.Join(c.truth(i), ",") {
			t.Fatalf("owner %s: %v %v", owner[0], err, addrs(u))
		}
	}
	if redirected == 0 {
		t.Fatal("expected some services to be owned elsewhere")
	}
	// A stream marked as relayed is never relayed again.
	md := metadata.Pairs(ForwardedHeader, "test")
	for i := range ringServices {
		ns, name := svcName(i)
		k := NewServiceKey(ns, name)
		if nodes[0].cluster.Ring().Owner(k.String()).Name == nodes[0].name {
			continue
		}
		s, _ := pb.NewDestinationClient(testutil.DialGRPC(t, nodes[0].addr)).Get(metadata.NewOutgoingContext(ctx, md), &pb.GetDestination{Path: servicePath(i)})
		if _, err := s.Recv(); status.Code(err) != codes.Unavailable {
			t.Fatalf("relayed stream to a non-owner: %v", err)
		}
		break
	}
}
