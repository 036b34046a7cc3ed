package ring

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/meridian-mesh/meridian/internal/testutil"
)

// testKey returns a 32-byte gossip key made of b.
func testKey(b byte) []byte { return bytes.Repeat([]byte{b}, 32) }

func TestNewInsecureGossip(t *testing.T) {
	n := startNode(t, "plain", nil)
	if got := metricValue(t, n.reg, "ring_insecure_gossip"); got != 1 {
		t.Errorf("ring_insecure_gossip = %v with plaintext gossip, want 1", got)
	}
	if w := n.Warnings(); len(w) != 1 || !strings.Contains(w[0], "not encrypted") || !strings.Contains(w[0], n.GossipAddr()) {
		t.Errorf("Warnings = %q, want one naming plaintext gossip on %s", w, n.GossipAddr())
	}
	if p, a := n.GossipKeys(); p != nil || a != nil {
		t.Errorf("GossipKeys = %x, %x with plaintext gossip", p, a)
	}
	if err := n.SetGossipKeys(testKey('a')); err == nil || !strings.Contains(err.Error(), "plaintext") {
		t.Errorf("SetGossipKeys on plaintext gossip: %v, want a refusal", err)
	}
	k := startNode(t, "keyed", testKey('a'))
	if got := metricValue(t, k.reg, "ring_insecure_gossip"); got != 0 {
		t.Errorf("ring_insecure_gossip = %v with a key, want 0", got)
	}
	if got := metricValue(t, k.reg, "ring_gossip_keys"); got != 1 {
		t.Errorf("ring_gossip_keys = %v, want 1", got)
	}
	if w := k.Warnings(); len(w) != 0 {
		t.Errorf("Warnings with a key = %q", w)
	}
}

func TestSetGossipKeysRefusesBadKeys(t *testing.T) {
	a := testKey('a')
	n := startNode(t, "n", a)
	for _, tc := range []struct {
		name     string
		primary  []byte
		accepted [][]byte
		want     string
	}{
		{"empty primary", nil, [][]byte{testKey('b')}, "no primary"},
		{"short primary", []byte("short"), nil, "gossip key is 5 bytes"},
		{"short accepted", testKey('b'), [][]byte{[]byte("x")}, "accepted gossip key 1"},
	} {
		err := n.SetGossipKeys(tc.primary, tc.accepted...)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "keeping the current keys") {
			t.Errorf("%s: SetGossipKeys = %v, want an error with %q that keeps the keys", tc.name, err, tc.want)
		}
		if p, acc := n.GossipKeys(); !bytes.Equal(p, a) || len(acc) != 0 {
			t.Fatalf("%s: keys now %x %x, want the old primary alone", tc.name, p, acc)
		}
	}
	// Duplicates collapse; the primary listed as accepted too is one key.
	if err := n.SetGossipKeys(a, testKey('b'), a, testKey('b')); err != nil {
		t.Fatal(err)
	}
	if p, acc := n.GossipKeys(); !bytes.Equal(p, a) || len(acc) != 1 || !bytes.Equal(acc[0], testKey('b')) {
		t.Errorf("keys %x %x, want a then b", p, acc)
	}
	if got := metricValue(t, n.reg, "ring_gossip_keys"); got != 2 {
		t.Errorf("ring_gossip_keys = %v, want 2", got)
	}
}

// refusals returns memberlist's lines that say a message was refused for its encryption.
// (Suspicions are not counted: on a loaded machine a probe can miss its 250ms without any
// key being wrong, and a refuted suspicion loses no member.)
func refusals(logs *observer.ObservedLogs) []string {
	var out []string
	for _, e := range logs.All() {
		if refusedMessage(e.Message) {
			out = append(out, e.Message)
		}
	}
	return out
}

// TestClusterKeyRotation rotates a ring of three live members from key A to key B in the
// three steps of SetGossipKeys's comment, one member at a time. After every single change,
// for a full probe round, no member is lost and no message is refused; at the end the ring
// never changed, a member with only the retired key cannot join, and one with the new key
// can.
func TestClusterKeyRotation(t *testing.T) {
	A, B := testKey('A'), testKey('B')
	core, logs := observer.New(zap.InfoLevel)
	start := func(name string, seeds ...string) *node {
		return startNodeWith(t, name, func(cfg *Config) {
			cfg.GossipKey, cfg.InsecureGossip, cfg.Join = A, false, seeds
			cfg.Logger = zap.New(core).Named(name)
		})
	}
	a := start("a")
	b := start("b", a.GossipAddr())
	c := start("c", a.GossipAddr())
	nodes := []*node{a, b, c}
	waitConverged(t, nodes, "a,b,c")
	logs.TakeAll() // what the start-up said
	changes := make([]float64, len(nodes))
	for i, n := range nodes {
		changes[i] = metricValue(t, n.reg, "ring_changes_total")
	}
	bad := func(step string, n *node) func() bool {
		return func() bool {
			if l := refusals(logs); len(l) > 0 {
				t.Errorf("after %s on %s: %q", step, n.Self().Name, l)
				return true
			}
			for _, m := range nodes {
				if got := memberNames(m.Ring()); got != "a,b,c" {
					t.Errorf("after %s on %s: %s sees %s", step, n.Self().Name, m.Self().Name, got)
					return true
				}
				if got := metricValue(t, m.reg, "ring_gossip_refused_total"); got != 0 {
					t.Errorf("after %s on %s: %s refused %v messages", step, n.Self().Name, m.Self().Name, got)
					return true
				}
			}
			return false
		}
	}
	for _, step := range []struct {
		name     string
		primary  []byte
		accepted [][]byte
	}{
		{"accepting B", A, [][]byte{B}},
		{"sending with B", B, [][]byte{A}},
		{"dropping A", B, nil},
	} {
		for _, n := range nodes {
			if err := n.SetGossipKeys(step.primary, step.accepted...); err != nil {
				t.Fatalf("%s on %s: %v", step.name, n.Self().Name, err)
			}
			// A probe round of every member (Fast: a probe every 500ms, two peers each).
			testutil.Never(t, 1200*time.Millisecond, step.name+" on "+n.Self().Name+" disturbing the ring", bad(step.name, n))
		}
	}
	for i, n := range nodes {
		if p, acc := n.GossipKeys(); !bytes.Equal(p, B) || len(acc) != 0 {
			t.Errorf("%s holds %x %x, want B alone", n.Self().Name, p, acc)
		}
		if got := metricValue(t, n.reg, "ring_changes_total"); got != changes[i] {
			t.Errorf("%s: ring_changes_total %v -> %v during the rotation", n.Self().Name, changes[i], got)
		}
	}
	// The retired key no longer opens the ring; the new one does.
	old := startNode(t, "old", A, a.GossipAddr())
	testutil.Never(t, 2*time.Second, "a member with the retired key joining", old.Joined)
	testutil.Eventually(t, converge, "the refusal of the retired key to be counted", func() bool {
		return metricValue(t, a.reg, "ring_gossip_refused_total") > 0
	})
	old.stop(t)
	d := startNode(t, "d", B, b.GossipAddr())
	waitConverged(t, []*node{a, b, c, d}, "a,b,c,d")
}

// TestClusterRotationOutOfOrder is the control of TestClusterKeyRotation: a member that
// sends with a key the others do not hold yet is refused and falls out of the ring, which
// the rotation test's checks would see.
func TestClusterRotationOutOfOrder(t *testing.T) {
	A, B := testKey('A'), testKey('B')
	a := startNode(t, "a", A)
	b := startNode(t, "b", A, a.GossipAddr())
	waitConverged(t, []*node{a, b}, "a,b")
	if err := b.SetGossipKeys(B); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, converge, "a to refuse b's messages and drop b", func() bool {
		return metricValue(t, a.reg, "ring_gossip_refused_total") > 0 && memberNames(a.Ring()) == "a"
	})
}

// TestClusterRefusesPlaintextJoin: a member without a key cannot join a keyed ring; the
// keyed members count what they refused.
func TestClusterRefusesPlaintextJoin(t *testing.T) {
	key := testKey('k')
	a := startNode(t, "a", key)
	b := startNode(t, "b", key, a.GossipAddr())
	waitConverged(t, []*node{a, b}, "a,b")
	rogue := startNode(t, "rogue", nil, a.GossipAddr(), b.GossipAddr())
	testutil.Never(t, 2*time.Second, "a plaintext member joining a keyed ring", func() bool {
		return rogue.Joined() || memberNames(a.Ring()) != "a,b" || memberNames(b.Ring()) != "a,b"
	})
	testutil.Eventually(t, converge, "the keyed members to count the refusals", func() bool {
		return metricValue(t, a.reg, "ring_gossip_refused_total") > 0
	})
}

func TestDefaultGossipAddr(t *testing.T) {
	for _, tc := range []struct{ grpc, want, err string }{
		{"10.1.2.3:8086", "10.1.2.3:7946", ""},
		{"[fd00::7]:8086", "[fd00::7]:7946", ""},
		{"replica-0.dst:8086", "", "not an IP address"},
		{"10.1.2.3", "", "missing port"},
	} {
		got, err := DefaultGossipAddr(tc.grpc)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("DefaultGossipAddr(%q) = %q, %v; want an error with %q", tc.grpc, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("DefaultGossipAddr(%q) = %q, %v; want %q", tc.grpc, got, err, tc.want)
		}
	}
}

// TestGossipBindsGRPCHost: with no gossip address, gossip listens on the gRPC address's
// host at port 7946 and on no other address, in TCP and UDP alike.
func TestGossipBindsGRPCHost(t *testing.T) {
	host := fmt.Sprintf("127.%d.%d.%d", 1+rand.N(250), 1+rand.N(250), 2+rand.N(250))
	// Another loopback address's port 7946, free before gossip starts, must stay free.
	const other = "127.0.0.1:7946"
	free := func() error {
		l, err := net.Listen("tcp", other)
		if err != nil {
			return err
		}
		l.Close()
		u, err := net.ListenPacket("udp", other)
		if err != nil {
			return err
		}
		return u.Close()
	}
	if err := free(); err != nil {
		t.Skipf("%s is taken here by another process: %v", other, err)
	}
	cfg := DefaultConfig()
	cfg.NodeName, cfg.GRPCAddr, cfg.GossipKey = "n", host+":8086", testKey('a')
	c, err := New(cfg)
	if errors.Is(err, syscall.EADDRINUSE) || (err != nil && strings.Contains(err.Error(), "address already in use")) {
		t.Skipf("port 7946 is taken here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got, want := c.GossipAddr(), host+":7946"; got != want {
		t.Fatalf("GossipAddr = %s, want %s", got, want)
	}
	if err := free(); err != nil {
		t.Errorf("gossip on %s holds %s too (bound every address?): %v", host, other, err)
	}
	conn, err := net.DialTimeout("tcp", c.GossipAddr(), 5*time.Second)
	if err != nil {
		t.Fatalf("dial gossip at %s: %v", c.GossipAddr(), err)
	}
	conn.Close()
}
