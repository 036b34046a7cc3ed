package ring

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/meridian-mesh/meridian/internal/testutil"
)

// memberlist's Shutdown does not wait for a probe in flight: let the last ones end.
func TestMain(m *testing.M) { os.Exit(testutil.Main(m, testutil.RunThenSettle(10*time.Second))) }

// converge is the generous deadline for gossip to settle on loopback, even under -race on
// a loaded machine. It is a bound on waiting, not a performance assertion.
const converge = 30 * time.Second

// node is a Cluster under test with its Run goroutine.
type node struct {
	*Cluster
	reg    *prometheus.Registry
	cancel context.CancelFunc
	done   chan error
}

// stop cancels Run and waits for it to return.
func (n *node) stop(t *testing.T) {
	t.Helper()
	n.cancel()
	if err := testutil.Recv(t, n.done, 20*time.Second, n.Self().Name+": Run to return after cancel"); err != nil {
		t.Errorf("%s: Run returned %v", n.Self().Name, err)
	}
	n.done = nil
}

func testLogger() *zap.Logger {
	if os.Getenv("RING_TEST_LOG") != "" {
		l, _ := zap.NewDevelopment()
		return l
	}
	return zap.NewNop()
}

var grpcPort = 20000

// startNode creates and runs a fast-gossip member on 127.0.0.1 port 0, with gossip
// encrypted by key, or in plaintext (InsecureGossip) when key is nil. It is stopped at the
// end of the test if still running.
func startNode(t *testing.T, name string, key []byte, seeds ...string) *node {
	t.Helper()
	return startNodeWith(t, name, func(cfg *Config) {
		cfg.Join = seeds
		cfg.GossipKey = key
		cfg.InsecureGossip = key == nil
	})
}

// startNodeWith is startNode with the config adjusted by mod (plaintext gossip unless mod
// gives a key).
func startNodeWith(t *testing.T, name string, mod func(*Config)) *node {
	t.Helper()
	grpcPort++
	cfg := DefaultConfig()
	cfg.NodeName = name
	cfg.GossipAddr = "127.0.0.1:0"
	cfg.GRPCAddr = fmt.Sprintf("127.0.0.1:%d", grpcPort)
	cfg.Fast = true
	cfg.InsecureGossip = true
	mod(&cfg)
	if cfg.Logger == nil {
		cfg.Logger = testLogger().Named(name)
	}
	reg := prometheus.NewRegistry()
	cfg.Registerer = reg
	c, err := New(cfg)
	if err != nil {
		t.Fatalf("New(%s): %v", name, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	n := &node{Cluster: c, reg: reg, cancel: cancel, done: make(chan error, 1)}
	go func() { n.done <- c.Run(ctx) }()
	t.Cleanup(func() {
		if n.done != nil {
			n.stop(t)
		}
	})
	return n
}

// metricValue returns the value of the single gauge or counter called name in reg.
func metricValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name || len(mf.GetMetric()) != 1 {
			continue
		}
		m := mf.GetMetric()[0]
		if g := m.GetGauge(); g != nil {
			return g.GetValue()
		}
		if c := m.GetCounter(); c != nil {
			return c.GetValue()
		}
	}
	t.Fatalf("metric %s not found", name)
	return 0
}

// memberNames returns the sorted member names of r, joined by commas.
func memberNames(r *Ring) string {
	var names []string
	for _, m := range r.Members() {
		names = append(names, m.Name)
	}
	return strings.Join(names, ",")
}

// waitConverged waits until every node's ring has exactly the named members and all rings
// are equal, then checks that they agree on the owner of 1000 keys.
func waitConverged(t *testing.T, nodes []*node, want string) {
	t.Helper()
	testutil.Eventually(t, converge, "rings to converge on "+want, func() bool {
		for _, n := range nodes {
			if !n.Joined() || memberNames(n.Ring()) != want || !n.Ring().Equal(nodes[0].Ring()) {
				return false
			}
		}
		return true
	})
	keys := testKeys(1000)
	for _, n := range nodes[1:] {
		for _, k := range keys {
			if a, b := nodes[0].Ring().Owner(k), n.Ring().Owner(k); a != b {
				t.Fatalf("owner of %q: %s says %v, %s says %v", k, nodes[0].Self().Name, a, n.Self().Name, b)
			}
		}
	}
	for _, n := range nodes {
		if got := metricValue(t, n.reg, "ring_members"); got != float64(len(strings.Split(want, ","))) {
			t.Errorf("%s: ring_members = %v, want %d", n.Self().Name, got, len(strings.Split(want, ",")))
		}
		// Every member's address in the ring is the one it advertises.
		self, ok := n.Ring().Member(n.Self().Name)
		if !ok || self != n.Self() {
			t.Errorf("%s: ring has %v for self, want %v", n.Self().Name, self, n.Self())
		}
	}
}

func TestClusterJoinLeaveJoin(t *testing.T) {
	a := startNode(t, "a", nil)
	b := startNode(t, "b", nil, a.GossipAddr())
	c := startNode(t, "c", nil, a.GossipAddr(), b.GossipAddr())
	sub, cancelSub := a.Subscribe()
	defer cancelSub()

	// Readers look owners up while the ring changes under them (for -race), 64 lookups a
	// millisecond so as not to starve the gossip.
	stopReaders := make(chan struct{})
	var readers sync.WaitGroup
	for _, n := range []*node{a, c} {
		readers.Add(1)
		go func() {
			defer readers.Done()
			keys := testKeys(100)
			tick := time.NewTicker(time.Millisecond)
			defer tick.Stop()
			for i := 0; ; i++ {
				if i%64 == 0 {
					select {
					case <-stopReaders:
						return
					case <-tick.C:
					}
				}
				r := n.Ring()
				if m := r.Owner(keys[i%len(keys)]); m.Name == "" {
					t.Errorf("%s: empty owner in ring %v", n.Self().Name, r)
					return
				}
			}
		}()
	}
	defer func() {
		close(stopReaders)
		readers.Wait()
	}()

	waitConverged(t, []*node{a, b, c}, "a,b,c")
	testutil.Recv(t, sub, converge, "the subscriber of a to be notified of the ring change")
	changesBefore := metricValue(t, a.reg, "ring_changes_total")

	// b leaves gracefully: the others drop it.
	b.stop(t)
	if b.Joined() {
		t.Errorf("b still Joined after Run returned")
	}
	waitConverged(t, []*node{a, c}, "a,c")
	testutil.Recv(t, sub, converge, "the subscriber of a to be notified of b leaving")
	if got := metricValue(t, a.reg, "ring_changes_total"); got <= changesBefore {
		t.Errorf("ring_changes_total did not grow on leave: %v -> %v", changesBefore, got)
	}

	// A fourth member joins through c only.
	d := startNode(t, "d", nil, c.GossipAddr())
	waitConverged(t, []*node{a, c, d}, "a,c,d")

	// The metrics are registered under their documented names.
	if got := metricValue(t, a.reg, "ring_changes_total"); got < 3 {
		t.Errorf("ring_changes_total = %v after three changes", got)
	}
}

// TestClusterFailure: a member that stops without leaving (a crash) is detected by
// probing and dropped from the others' rings.
func TestClusterFailure(t *testing.T) {
	a := startNode(t, "a", nil)
	b := startNode(t, "b", nil, a.GossipAddr())
	c := startNode(t, "c", nil, a.GossipAddr())
	waitConverged(t, []*node{a, b, c}, "a,b,c")
	start := time.Now()
	if err := c.Close(); err != nil { // gossip stops; no leave message
		t.Fatal(err)
	}
	waitConverged(t, []*node{a, b}, "a,b")
	t.Logf("crashed member dropped after %v (Fast gossip settings)", time.Since(start).Round(10*time.Millisecond))
	// The survivors' failure detectors counted how they got there: memberlist reports
	// suspicions and failures only in its log lines, so this also checks that the lines
	// ring_failure_detector_events_total reads are still the ones memberlist writes.
	for _, ev := range []string{"suspected", "declared_failed"} {
		if got := eventCount(t, a.reg, ev) + eventCount(t, b.reg, ev); got < 1 {
			t.Errorf("ring_failure_detector_events_total{event=%q} on a and b = %v, want at least 1", ev, got)
		}
	}
	c.stop(t)
}

// TestClusterDNSSeed joins through a host name that resolves to several addresses
// ("localhost": 127.0.0.1 and possibly ::1, where nothing listens).
func TestClusterDNSSeed(t *testing.T) {
	if _, err := net.DefaultResolver.LookupNetIP(context.Background(), "ip", "localhost"); err != nil {
		t.Skipf("localhost does not resolve here: %v", err)
	}
	a := startNode(t, "a", nil)
	_, port, _ := net.SplitHostPort(a.GossipAddr())
	b := startNode(t, "b", nil, "localhost:"+port)
	waitConverged(t, []*node{a, b}, "a,b")
}

func TestClusterEncryption(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	other := []byte("fedcba9876543210fedcba9876543210")
	a := startNode(t, "a", key)
	b := startNode(t, "b", key, a.GossipAddr())
	waitConverged(t, []*node{a, b}, "a,b")

	// Wrong key, and no key at all: neither can join, and the cluster never sees them.
	wrong := startNode(t, "wrong", other, a.GossipAddr(), b.GossipAddr())
	plain := startNode(t, "plain", nil, a.GossipAddr())
	// Over many join attempts (retry backoff is at most 1s in Fast mode).
	testutil.Never(t, 3*time.Second, "a member with another key or none joining", func() bool {
		bad := false
		for _, n := range []*node{wrong, plain} {
			if n.Joined() {
				t.Errorf("%s joined a cluster with a different key", n.Self().Name)
				bad = true
			}
			if got := memberNames(n.Ring()); got != n.Self().Name {
				t.Errorf("%s sees members %s", n.Self().Name, got)
				bad = true
			}
		}
		for _, n := range []*node{a, b} {
			if got := memberNames(n.Ring()); got != "a,b" {
				t.Errorf("%s sees members %s, want a,b", n.Self().Name, got)
				bad = true
			}
		}
		return bad
	})
}

// TestClusterUnreachableSeed: a member whose seeds do not answer is not joined, keeps
// trying, and still stops promptly; once a peer appears at the seed... is covered by
// TestClusterLateSeed.
func TestClusterUnreachableSeed(t *testing.T) {
	lis := testutil.Listen(t)
	dead := lis.Addr().String()
	lis.Close() // nothing listens there now
	n := startNode(t, "lonely", nil, dead)
	testutil.Never(t, 500*time.Millisecond, "joining with no reachable seed", n.Joined)
	n.stop(t)
}

// TestClusterRestartWithSameName: a member that leaves and comes back under the same name
// with a new address is taken back, with its new address.
func TestClusterRestartWithSameName(t *testing.T) {
	a := startNode(t, "a", nil)
	b := startNode(t, "b", nil, a.GossipAddr())
	c := startNode(t, "c", nil, b.GossipAddr())
	waitConverged(t, []*node{a, b, c}, "a,b,c")
	oldAddr := a.Self().Addr
	a.stop(t)
	waitConverged(t, []*node{b, c}, "b,c")
	a2 := startNode(t, "a", nil, c.GossipAddr())
	if a2.Self().Addr == oldAddr {
		t.Fatalf("test setup: restarted member kept its address")
	}
	waitConverged(t, []*node{a2, b, c}, "a,b,c")
}

// fakeDNS answers seed lookups from a table the test changes; names not in it do not
// exist.
type fakeDNS struct {
	mu    sync.Mutex
	hosts map[string][]netip.Addr
}

func (d *fakeDNS) set(host string, addrs ...string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.hosts == nil {
		d.hosts = map[string][]netip.Addr{}
	}
	d.hosts[host] = nil
	for _, a := range addrs {
		d.hosts[host] = append(d.hosts[host], netip.MustParseAddr(a))
	}
}

func (d *fakeDNS) lookup(_ context.Context, host string) ([]netip.Addr, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if a := d.hosts[host]; len(a) > 0 {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// freePort returns a TCP and UDP port free on all the given loopback addresses.
func freePort(t *testing.T, ips ...string) int {
	t.Helper()
	for try := 0; try < 50; try++ {
		lis, err := net.Listen("tcp", ips[0]+":0")
		if err != nil {
			t.Fatal(err)
		}
		port := lis.Addr().(*net.TCPAddr).Port
		lis.Close()
		ok := true
		for _, ip := range ips {
			l, err := net.Listen("tcp", fmt.Sprintf("%s:%d", ip, port))
			if err != nil {
				ok = false
				break
			}
			l.Close()
			u, err := net.ListenPacket("udp", fmt.Sprintf("%s:%d", ip, port))
			if err != nil {
				ok = false
				break
			}
			u.Close()
		}
		if ok {
			return port
		}
	}
	t.Fatal("no common free port")
	return 0
}

// TestClusterHeadlessService plays the Kubernetes start-up: every replica binds the same
// port on its own IP and has one seed, a DNS name that lists the replicas. At first the
// name has no records: each replica forms a cluster alone. When the records appear, the
// replicas, alone, retry and merge. A replica whose records point at a member that is not
// up yet is not joined until it is.
func TestClusterHeadlessService(t *testing.T) {
	ips := []string{"127.0.0.1", "127.0.0.2", "127.0.0.3"}
	l, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("127.0.0.2 not usable here: %v", err)
	}
	l.Close()
	port := freePort(t, ips...)
	dns := &fakeDNS{}
	start := func(name, ip string) *node {
		return startNodeWith(t, name, func(cfg *Config) {
			cfg.GossipAddr = fmt.Sprintf("%s:%d", ip, port)
			cfg.GRPCAddr = ip + ":8086"
			cfg.Join = []string{"destination-headless.test"}
			cfg.lookupNetIP = dns.lookup
		})
	}
	a := start("a", ips[0])
	b := start("b", ips[1])
	testutil.Eventually(t, converge, "a and b to form clusters alone", func() bool { return a.Joined() && b.Joined() })
	if memberNames(a.Ring()) != "a" || memberNames(b.Ring()) != "b" {
		t.Fatalf("before DNS records: a sees %s, b sees %s", memberNames(a.Ring()), memberNames(b.Ring()))
	}

	dns.set("destination-headless.test", ips...) // includes 127.0.0.3, where nothing runs yet
	waitConverged(t, []*node{a, b}, "a,b")

	// c's only peers in DNS are down: it must not claim to be joined.
	dns.set("destination-headless.test", ips[2], "127.0.0.4")
	c := start("c", ips[2])
	testutil.Never(t, time.Second, "c joining with no reachable peer", c.Joined)
	dns.set("destination-headless.test", ips...)
	waitConverged(t, []*node{a, b, c}, "a,b,c")
}

// TestClusterFirstMember: when the seeds name nothing but this member (the first replica
// behind a headless Service whose DNS name has no records yet), it forms the cluster.
func TestClusterFirstMember(t *testing.T) {
	var dnsErr *net.DNSError
	if _, err := net.DefaultResolver.LookupNetIP(context.Background(), "ip", "meridian-seed.invalid"); !errors.As(err, &dnsErr) || !dnsErr.IsNotFound {
		t.Skipf("no NXDOMAIN for .invalid here: %v", err)
	}
	a := startNode(t, "a", nil, "meridian-seed.invalid:7946")
	testutil.Eventually(t, converge, "a to be joined alone", a.Joined)
	b := startNode(t, "b", nil, a.GossipAddr(), "meridian-seed.invalid")
	waitConverged(t, []*node{a, b}, "a,b")
}

func TestClusterSubscribeCoalesces(t *testing.T) {
	a := startNode(t, "a", nil)
	ch, cancel := a.Subscribe()
	ch2, cancel2 := a.Subscribe()
	cancel2()
	cancel2() // idempotent
	b := startNode(t, "b", nil, a.GossipAddr())
	c := startNode(t, "c", nil, a.GossipAddr())
	waitConverged(t, []*node{a, b, c}, "a,b,c")
	// Two or more changes happened; the channel holds at most one notification.
	testutil.Recv(t, ch, converge, "a notification")
	select {
	case <-ch:
		// Possible if a change landed after the first receive; then no more are queued.
		select {
		case <-ch:
			t.Fatal("more than one notification queued")
		default:
		}
	default:
	}
	select {
	case <-ch2:
		t.Error("cancelled subscription was notified")
	default:
	}
	cancel()
}

func TestClusterLifecycle(t *testing.T) {
	a := startNode(t, "a", nil)
	testutil.Eventually(t, converge, "a to run", a.Joined) // the first Run has started
	ctx, cancel := context.WithTimeout(context.Background(), converge)
	defer cancel()
	if err := a.Run(ctx); err == nil {
		t.Error("second Run succeeded")
	}
	a.stop(t)
	if err := a.Close(); err != nil {
		t.Errorf("Close after Run: %v", err)
	}

	// A Cluster that is never Run is released by Close (idempotent).
	cfg := DefaultConfig()
	cfg.NodeName, cfg.GossipAddr, cfg.GRPCAddr, cfg.InsecureGossip = "x", "127.0.0.1:0", "127.0.0.1:1", true
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Ring().Members(); len(got) != 1 || got[0] != c.Self() {
		t.Errorf("initial ring = %v, want just self", got)
	}
	if c.Joined() {
		t.Error("Joined before Run")
	}
	c.Close()
	c.Close()
}

func TestNewRejectsBadConfig(t *testing.T) {
	base := func() Config {
		c := DefaultConfig()
		c.NodeName, c.GossipAddr, c.GRPCAddr, c.GossipKey = "n", "127.0.0.1:0", "127.0.0.1:8086", testKey('a')
		return c
	}
	for _, tc := range []struct {
		name string
		mod  func(*Config)
		want string
	}{
		{"no name", func(c *Config) { c.NodeName = "" }, "node name"},
		{"no grpc", func(c *Config) { c.GRPCAddr = "" }, "gRPC address"},
		{"grpc without port", func(c *Config) { c.GRPCAddr = "10.0.0.1" }, "gRPC address"},
		{"grpc too long", func(c *Config) { c.GRPCAddr = strings.Repeat("a", 600) + ":1" }, "exceeds"},
		{"key length", func(c *Config) { c.GossipKey = []byte("short") }, "gossip key"},
		{"accepted key length", func(c *Config) { c.AcceptedKeys = [][]byte{[]byte("short")} }, "accepted gossip key 1"},
		{"no key", func(c *Config) { c.GossipKey = nil }, "no gossip key"},
		{"accepted without primary", func(c *Config) { c.GossipKey, c.AcceptedKeys = nil, [][]byte{testKey('b')} }, "without a primary"},
		{"key and insecure", func(c *Config) { c.InsecureGossip = true }, "choose one"},
		{"default gossip addr on a host name", func(c *Config) { c.GossipAddr, c.GRPCAddr = "", "replica.example:8086" }, "not an IP address"},
		{"bad seed", func(c *Config) { c.Join = []string{"host:99999"} }, "port"},
		{"bad gossip addr", func(c *Config) { c.GossipAddr = "nohost" }, "gossip address"},
		{"gossip host name", func(c *Config) { c.GossipAddr = "example.com:7946" }, "IP address"},
		{"bad advertise", func(c *Config) { c.AdvertiseAddr = "pod.example:7946" }, "advertise"},
		{"bad hash", func(c *Config) { c.Hash.Partitions = 0 }, "partitions"},
		{"negative cold-start wait", func(c *Config) { c.ColdStartWait = -time.Second }, "cold-start wait"},
		{"negative expected members", func(c *Config) { c.ExpectMembers = -1 }, "expected members"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := base()
			tc.mod(&cfg)
			c, err := New(cfg)
			if err == nil {
				c.Close()
				t.Fatalf("New succeeded")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not mention %q", err, tc.want)
			}
		})
	}
	// Registering twice on one registry is an error, not a panic.
	reg := prometheus.NewRegistry()
	cfg := base()
	cfg.Registerer = reg
	c1, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c1.Close()
	if c2, err := New(cfg); err == nil {
		c2.Close()
		t.Error("second New on the same registry succeeded")
	}

	// A New that fails to bind leaves the registry clean for the next attempt.
	reg2 := prometheus.NewRegistry()
	cfg2 := base()
	cfg2.Registerer = reg2
	cfg2.GossipAddr = c1.GossipAddr() // taken
	if c3, err := New(cfg2); err == nil {
		c3.Close()
		t.Fatal("New on a port in use succeeded")
	}
	cfg2.GossipAddr = "127.0.0.1:0"
	c4, err := New(cfg2)
	if err != nil {
		t.Fatalf("New after a failed New on the same registry: %v", err)
	}
	c4.Close()
}

func TestAdvertiseAddr(t *testing.T) {
	cfg := DefaultConfig()
	cfg.NodeName, cfg.GossipAddr, cfg.GRPCAddr, cfg.InsecureGossip = "n", "127.0.0.1:0", "127.0.0.1:8086", true
	cfg.AdvertiseAddr = "127.0.0.1"
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	host, port, err := net.SplitHostPort(c.GossipAddr())
	if err != nil || host != "127.0.0.1" || port == "0" {
		t.Errorf("GossipAddr = %q, want 127.0.0.1 with the bound port", c.GossipAddr())
	}
}
