package shard

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	pb "github.com/linkerd/linkerd2-proxy-api/go/destination"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/meridian-mesh/meridian/internal/destclient"
	"github.com/meridian-mesh/meridian/internal/grpcserver"
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

// shardNode is one replica: a memberlist node, a Replica on the directory, a gRPC server.
type shardNode struct {
	name    string
	cluster *ring.Cluster
	replica *Replica
	addr    string
	cancel  context.CancelFunc
	done    chan struct{}
}

func startShard(t *testing.T, c *cluster, name string, mode NonOwnerMode, seeds ...string) *shardNode {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	log := zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)).Named(name)
	rc := ring.DefaultConfig()
	rc.NodeName, rc.GossipAddr, rc.GRPCAddr, rc.Join, rc.Fast, rc.Logger = name, "127.0.0.1:0", lis.Addr().String(), seeds, true, log
	rc.Registerer = prometheus.NewRegistry()
	members, err := ring.New(rc)
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.NonOwner = mode
	dcfg := source.DefaultDirConfig(c.dir)
	dcfg.Rescan = 200 * time.Millisecond
	reg := prometheus.NewRegistry()
	r := NewReplica(cfg, source.NewDirWithConfig(dcfg, log), reg, log)
	r.SetMembership(members)
	gs := grpcserver.New(reg)
	r.Register(gs)
	ctx, cancel := context.WithCancel(context.Background())
	n := &shardNode{name: name, cluster: members, replica: r, addr: lis.Addr().String(), cancel: cancel, done: make(chan struct{})}
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { defer wg.Done(); _ = members.Run(ctx) }()
	go func() { defer wg.Done(); _ = r.Run(ctx) }()
	go func() { defer wg.Done(); _ = grpcserver.Serve(ctx, gs, lis, time.Second) }()
	go func() { wg.Wait(); close(n.done) }()
	t.Cleanup(func() { n.stop(t) })
	return n
}

func (n *shardNode) stop(t *testing.T) {
	n.cancel()
	select {
	case <-n.done:
	case <-time.After(20 * time.Second):
		t.Errorf("replica %s did not stop", n.name)
	}
}

func (n *shardNode) gossip() string { return n.cluster.GossipAddr() }

// waitConverged waits until every node sees the same ring of want members and is ready.
func waitConverged(t *testing.T, nodes []*shardNode, want int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ok := true
		id := nodes[0].cluster.Ring().ID()
		for _, n := range nodes {
			r := n.cluster.Ring()
			if r.Len() != want || r.ID() != id || n.replica.Ready() != nil || n.replica.ring.load().ring.ID() != id {
				ok = false
			}
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			for _, n := range nodes {
				t.Logf("%s: members %d ready=%v", n.name, n.cluster.Ring().Len(), n.replica.Ready())
			}
			t.Fatalf("ring of %d did not converge within 30s", want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// watcher is a client Get stream following a service, with its view and any failure.
type watcher struct {
	svc  int
	mu   sync.Mutex
	view *destclient.View
	err  error
}

func (w *watcher) keys() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, a := range w.view.Sorted() {
		out = append(out, a.String())
	}
	return out
}

func (w *watcher) failure() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

func dial(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// watch opens a Get stream for service i through conn; the stream must never end while the
// test runs, and every update must apply cleanly (no lost or duplicated endpoint).
func watch(t *testing.T, ctx context.Context, wg *sync.WaitGroup, conn *grpc.ClientConn, i int) *watcher {
	ns, name := svcName(i)
	w := &watcher{svc: i, view: destclient.NewView()}
	s, err := pb.NewDestinationClient(conn).Get(ctx, &pb.GetDestination{Path: fmt.Sprintf("%s.%s.svc.cluster.local:80", name, ns)})
	if err != nil {
		t.Fatal(err)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			u, err := s.Recv()
			w.mu.Lock()
			if err != nil {
				if ctx.Err() == nil {
					w.err = fmt.Errorf("stream ended: %w", err)
				}
				w.mu.Unlock()
				return
			}
			if aerr := w.view.Apply(u); aerr != nil && w.err == nil {
				w.err = aerr
			}
			w.mu.Unlock()
		}
	}()
	return w
}

// watchAll opens a stream for every service through every node.
func watchAll(t *testing.T, ctx context.Context, wg *sync.WaitGroup, nodes []*shardNode) []*watcher {
	var ws []*watcher
	for _, n := range nodes {
		conn := dial(t, n.addr)
		for i := range ringServices {
			ws = append(ws, watch(t, ctx, wg, conn, i))
		}
	}
	return ws
}

// waitTruth waits until every watcher holds exactly the truth.
func waitTruth(t *testing.T, c *cluster, ws []*watcher, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		bad := 0
		var example string
		for _, w := range ws {
			if err := w.failure(); err != nil {
				t.Fatalf("service %d: %v", w.svc, err)
			}
			if got, want := w.keys(), c.truth(w.svc); strings.Join(got, ",") != strings.Join(want, ",") {
				bad++
				example = fmt.Sprintf("service %d holds %v, want %v", w.svc, got, want)
			}
		}
		if bad == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d streams differ from the truth after %s; e.g. %s", bad, len(ws), within, example)
		}
		time.Sleep(50 * time.Millisecond)
	}
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
	// Each service is held by exactly one replica, and the ring agrees on which.
	deadline := time.Now().Add(20 * time.Second)
	for {
		held, ok := 0, true
		for i := range ringServices {
			ns, name := svcName(i)
			k := ServiceKey{ns, name}
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
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("services not held by exactly their owner (%d holdings for %d services)", held, ringServices)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, n := range nodes {
		t.Logf("%s owns %d of %d services", n.name, n.replica.Index().Len(), ringServices)
	}
	// Any replica answers for any service, with the owner's endpoints.
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	ws := watchAll(t, ctx, &wg, nodes)
	waitTruth(t, c, ws, 20*time.Second)
	// An unknown service is NotFound through any replica.
	for _, n := range nodes {
		s, _ := pb.NewDestinationClient(dial(t, n.addr)).Get(ctx, &pb.GetDestination{Path: "nope.ns0.svc.cluster.local:80"})
		if _, err := s.Recv(); status.Code(err) != codes.NotFound {
			t.Fatalf("%s: unknown service gave %v", n.name, err)
		}
	}
}

func churn(ctx context.Context, c *cluster, wg *sync.WaitGroup) {
	wg.Add(1)
	go func() {
		defer wg.Done()
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
		}
	}()
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
	churnCtx, stopChurn := context.WithCancel(ctx)
	var cw sync.WaitGroup
	churn(churnCtx, c, &cw)
	time.Sleep(300 * time.Millisecond)
	// Crash the fourth replica: no graceful leave; memberlist detects it.
	killed := nodes[3]
	_ = killed.cluster.Close()
	killed.stop(t)
	time.Sleep(time.Second)
	stopChurn()
	cw.Wait()
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
	waitTruth(t, c, ws, 20*time.Second)
	before := map[string]int{}
	for _, n := range nodes {
		before[n.name] = n.replica.Index().Len()
	}
	churnCtx, stopChurn := context.WithCancel(ctx)
	var cw sync.WaitGroup
	churn(churnCtx, c, &cw)
	joined := startShard(t, c, "r3", Forward, nodes[0].gossip())
	nodes = append(nodes, joined)
	waitConverged(t, nodes, 4)
	time.Sleep(500 * time.Millisecond)
	stopChurn()
	cw.Wait()
	waitTruth(t, c, ws, 30*time.Second)
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
		ns, name := svcName(i)
		path := fmt.Sprintf("%s.%s.svc.cluster.local:80", name, ns)
		s, err := pb.NewDestinationClient(dial(t, nodes[0].addr)).Get(ctx, &pb.GetDestination{Path: path})
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
		s2, err := pb.NewDestinationClient(dial(t, owner[0])).Get(ctx, &pb.GetDestination{Path: path})
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
		k := ServiceKey{ns, name}
		if nodes[0].cluster.Ring().Owner(k.String()).Name == nodes[0].name {
			continue
		}
		s, _ := pb.NewDestinationClient(dial(t, nodes[0].addr)).Get(metadata.NewOutgoingContext(ctx, md), &pb.GetDestination{Path: fmt.Sprintf("%s.%s.svc.cluster.local:80", name, ns)})
		if _, err := s.Recv(); status.Code(err) != codes.Unavailable {
			t.Fatalf("relayed stream to a non-owner: %v", err)
		}
		break
	}
}
