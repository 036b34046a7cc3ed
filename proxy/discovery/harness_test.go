package discovery

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/meridian-mesh/meridian/internal/testutil"
	"github.com/meridian-mesh/meridian/proxy/internal/proxytest"
	"github.com/meridian-mesh/meridian/proxy/internal/replicatest"
	"github.com/meridian-mesh/meridian/shard"
)

func TestMain(m *testing.M) { os.Exit(testutil.Main(m, nil)) }

// within bounds every wait of these tests (generous: -race on a shared 2-core machine).
const within = 30 * time.Second

// cluster is a directory of Kubernetes YAML that every replica reads (the real directory
// source), one file per service.
type cluster struct {
	t   *testing.T
	dir string
}

func newCluster(t *testing.T) *cluster { return &cluster{t: t, dir: t.TempDir()} }

// svc describes one service's file: its ports (each targeting port+8000) and its ready
// endpoints (IPv4 addresses); meshed endpoints get a meshed pod each; noSlice writes the
// Service alone.
type svc struct {
	ns, name string
	ports    []int32
	ips      []string
	meshed   bool
	noSlice  bool
	// clusterIP, when set, is the Service's cluster IP.
	clusterIP string
}

// write replaces the service's file atomically.
func (c *cluster) write(s svc) {
	c.t.Helper()
	if len(s.ports) == 0 {
		s.ports = []int32{80}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: v1\nkind: Service\nmetadata: {namespace: %s, name: %s}\nspec:\n", s.ns, s.name)
	if s.clusterIP != "" {
		fmt.Fprintf(&b, "  clusterIP: %s\n", s.clusterIP)
	}
	b.WriteString("  ports:\n")
	for _, p := range s.ports {
		fmt.Fprintf(&b, "  - {name: p%d, port: %d, targetPort: %d}\n", p, p, p+8000)
	}
	if !s.noSlice {
		fmt.Fprintf(&b, "---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {namespace: %s, name: %s-a, labels: {kubernetes.io/service-name: %s}}\naddressType: IPv4\nports:\n", s.ns, s.name, s.name)
		for _, p := range s.ports {
			fmt.Fprintf(&b, "- {name: p%d, port: %d}\n", p, p+8000)
		}
		b.WriteString("endpoints:")
		if len(s.ips) == 0 {
			b.WriteString(" []")
		}
		b.WriteString("\n")
		for i, ip := range s.ips {
			fmt.Fprintf(&b, "- addresses: [%q]\n  conditions: {ready: true}\n", ip)
			if s.meshed {
				fmt.Fprintf(&b, "  targetRef: {kind: Pod, namespace: %s, name: %s-%d}\n", s.ns, s.name, i)
			}
		}
	}
	if s.meshed {
		for i, ip := range s.ips {
			fmt.Fprintf(&b, "---\napiVersion: v1\nkind: Pod\nmetadata: {namespace: %s, name: %s-%d, labels: {linkerd.io/control-plane-ns: linkerd}}\nspec: {serviceAccountName: %s}\nstatus: {phase: Running, podIP: %q, podIPs: [{ip: %q}]}\n", s.ns, s.name, i, s.name, ip, ip)
		}
	}
	file := fmt.Sprintf("svc-%s-%s.yaml", s.ns, s.name)
	tmp := filepath.Join(c.dir, "."+file+".tmp")
	if err := os.WriteFile(tmp, []byte(b.String()), 0o644); err != nil {
		c.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(c.dir, file)); err != nil {
		c.t.Fatal(err)
	}
}

// node is one destination replica on 127.0.0.1: a Replica on the cluster's directory, a gRPC
// server, and, in a ring, a memberlist member.
type node = replicatest.Node

// testGossipKey encrypts the test rings' gossip, as a key must outside tests.
var testGossipKey = []byte("meridian proxy test gossip key!!")

// startNode starts a replica serving on lis (a fresh listener when nil); with ring, it joins
// the memberlist cluster of seeds (or starts one).
func startNode(t *testing.T, c *cluster, name string, lis net.Listener, ringed bool, mode shard.NonOwnerMode, seeds ...string) *node {
	t.Helper()
	return replicatest.Start(t, replicatest.Config{Name: name, Dir: c.dir, Listener: lis, Ring: ringed, Seeds: seeds, GossipKey: testGossipKey, NonOwner: mode})
}

// startRing starts a ring of size replicas in mode and waits until they agree.
func startRing(t *testing.T, c *cluster, size int, mode shard.NonOwnerMode) []*node {
	t.Helper()
	nodes := []*node{startNode(t, c, "r0", nil, true, mode)}
	for i := 1; i < size; i++ {
		nodes = append(nodes, startNode(t, c, fmt.Sprintf("r%d", i), nil, true, mode, nodes[0].Members.GossipAddr()))
	}
	replicatest.WaitRing(t, nodes)
	return nodes
}

// sumMetric sums metric over nodes.
func sumMetric(t *testing.T, nodes []*node, name string, want map[string]string) float64 {
	total := 0.0
	for _, n := range nodes {
		total += proxytest.Gathered(t, n.Reg, name, want)
	}
	return total
}

// startedGets is the number of Get streams n has been asked for.
func startedGets(t *testing.T, n *node) float64 {
	return proxytest.Gathered(t, n.Reg, "grpc_server_started_total", map[string]string{"grpc_method": "Get"})
}

// newResolver runs a resolver asking addr over plaintext connections until the test ends.
func newResolver(t *testing.T, addr string, mutate func(*Config)) *Resolver {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Addr = addr
	cfg.BackoffMax = time.Second
	if mutate != nil {
		mutate(&cfg)
	}
	return runResolver(t, cfg, poolPlain(t))
}

// runResolver runs a resolver with cfg over conns until the test ends.
func runResolver(t *testing.T, cfg Config, conns Conns) *Resolver {
	t.Helper()
	r := NewResolver(cfg, conns, zaptest.NewLogger(t, zaptest.Level(zap.InfoLevel)))
	testutil.Go(t, "resolver", r.Run)
	return r
}

// poolPlain returns a pool of plaintext connections, closed when the test ends: after the
// resolvers started later have stopped (cleanups run last first).
func poolPlain(t *testing.T) *Pool {
	pool := NewPool(grpc.WithTransportCredentials(insecure.NewCredentials()))
	t.Cleanup(func() { _ = pool.Close() })
	return pool
}

// switchConns is a Conns that sends the name dst to whichever address the test sets (as a
// DNS name of the destination service would) and every other address as it is.
type switchConns struct {
	pool *Pool
	mu   sync.Mutex
	dst  string
}

const dstName = "destination.test:8086"

func (s *switchConns) set(addr string) {
	s.mu.Lock()
	s.dst = addr
	s.mu.Unlock()
}

func (s *switchConns) Conn(addr string) (grpc.ClientConnInterface, func(), error) {
	if addr == dstName {
		s.mu.Lock()
		addr = s.dst
		s.mu.Unlock()
	}
	return s.pool.Conn(addr)
}

// resolve resolves authority within 10 s, failing t on an error; the handle is released when
// the test ends.
func resolve(t *testing.T, r *Resolver, authority string) *Target {
	t.Helper()
	h, err := tryResolve(r, authority)
	if err != nil {
		t.Fatalf("resolve %s: %v", authority, err)
	}
	t.Cleanup(h.Release)
	return h
}

func tryResolve(r *Resolver, authority string) (*Target, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return r.Resolve(ctx, authority)
}

// addrs returns the endpoints' addresses as text.
func addrs(s *Snapshot) []string {
	out := make([]string, len(s.Endpoints))
	for i, e := range s.Endpoints {
		out[i] = e.Addr.String()
	}
	return out
}

// endpointsOf returns ips at port, sorted as a snapshot holds them.
func endpointsOf(port int, ips ...string) []string {
	out := make([]string, len(ips))
	for i, ip := range ips {
		out[i] = fmt.Sprintf("%s:%d", ip, port)
	}
	slices.Sort(out)
	return out
}

// waitEndpoints waits until h's snapshot holds exactly want (and the service exists).
func waitEndpoints(t *testing.T, h *Target, want []string) {
	t.Helper()
	testutil.EventuallyNoError(t, within, fmt.Sprintf("%s to hold %v", h.Authority(), want), func() error {
		s := h.Snapshot()
		if got := addrs(s); !s.Resolved || !s.Exists || !slices.Equal(got, want) {
			return fmt.Errorf("resolved %v, exists %v, endpoints %v", s.Resolved, s.Exists, got)
		}
		return nil
	})
}

// ownerOf returns the owner the resolver remembers for service ns/name.
func (r *Resolver) ownerOf(service string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if ref := r.services[service]; ref != nil {
		return ref.owner
	}
	return ""
}

// numTargets returns how many targets the resolver holds.
func (r *Resolver) numTargets() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.targets)
}

// recorder records every snapshot a target publishes, from a goroutine the test owns.
type recorder struct {
	mu    sync.Mutex
	snaps []*Snapshot
}

func record(t *testing.T, h *Target) *recorder {
	rec := &recorder{}
	testutil.Go(t, "snapshot recorder", func(ctx context.Context) error {
		for {
			ch := h.Changed()
			s := h.Snapshot()
			rec.mu.Lock()
			if len(rec.snaps) == 0 || rec.snaps[len(rec.snaps)-1] != s {
				rec.snaps = append(rec.snaps, s)
			}
			rec.mu.Unlock()
			select {
			case <-ctx.Done():
				return nil
			case <-ch:
			}
		}
	})
	return rec
}

func (rec *recorder) all() []*Snapshot {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return slices.Clone(rec.snaps)
}

// upTo returns what the recorder saw once it has seen h's current snapshot: the recorder
// runs on its own goroutine, and a wait on h itself can return before it caught up.
func (rec *recorder) upTo(t *testing.T, h *Target) []*Snapshot {
	t.Helper()
	now := h.Snapshot()
	testutil.Eventually(t, within, "the recorder to see the current snapshot", func() bool {
		all := rec.all()
		return len(all) > 0 && all[len(all)-1].Version >= now.Version
	})
	return rec.all()
}
