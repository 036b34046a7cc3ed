package replicatest

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/meridian-mesh/meridian/internal/grpcserver"
	"github.com/meridian-mesh/meridian/internal/testutil"
	"github.com/meridian-mesh/meridian/proxy/internal/proxytest"
	"github.com/meridian-mesh/meridian/ring"
	"github.com/meridian-mesh/meridian/shard"
	"github.com/meridian-mesh/meridian/shard/source"
)

// Within bounds every wait of these helpers (generous: -race on a shared 2-core machine).
const Within = 30 * time.Second

// Config describes one replica.
type Config struct {
	// Name is the replica's name (its ring member name, and its logger's).
	Name string
	// Dir is the directory of Kubernetes YAML the replica reads (rescanned every 200 ms).
	Dir string
	// Listener is where it serves gRPC; nil: a new listener on 127.0.0.1.
	Listener net.Listener
	// Ring makes it a memberlist member (gossip on 127.0.0.1), joining Seeds (none: it
	// starts a ring) with GossipKey.
	Ring      bool
	Seeds     []string
	GossipKey []byte
	// NonOwner is what it does with a stream for a service it does not own.
	NonOwner shard.NonOwnerMode
	// TransportMode is the translator's outbound transport mode ("": its default).
	TransportMode string
}

// Node is a running replica.
type Node struct {
	Name    string
	Members *ring.Cluster // nil for a replica alone
	Shard   *shard.Replica
	Reg     *prometheus.Registry // the replica's and its gRPC server's metrics
	Addr    string               // where it serves gRPC
	stop    func()               // stops the replica and its server and waits for them
}

// Start starts a replica and returns once it is ready; it runs until Kill or the end of the
// test.
func Start(t *testing.T, cfg Config) *Node {
	t.Helper()
	lis := cfg.Listener
	if lis == nil {
		lis = testutil.Listen(t)
	}
	log := zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)).Named(cfg.Name)
	n := &Node{Name: cfg.Name, Reg: prometheus.NewRegistry(), Addr: lis.Addr().String()}
	var membership shard.Membership
	if cfg.Ring {
		rc := ring.DefaultConfig()
		rc.NodeName, rc.GossipAddr, rc.GRPCAddr, rc.Join, rc.Fast, rc.Logger = cfg.Name, "127.0.0.1:0", n.Addr, cfg.Seeds, true, log
		rc.Registerer = prometheus.NewRegistry()
		rc.GossipKey = cfg.GossipKey
		members, err := ring.New(rc)
		if err != nil {
			t.Fatal(err)
		}
		n.Members, membership = members, members
	}
	sc := shard.DefaultConfig()
	sc.NonOwner = cfg.NonOwner
	if cfg.TransportMode != "" {
		sc.Translator.OutboundTransportMode = cfg.TransportMode
	}
	dcfg := source.DefaultDirConfig(cfg.Dir)
	dcfg.Rescan = 200 * time.Millisecond
	r, err := shard.NewReplica(sc, shard.Deps{Source: source.NewDirWithConfig(dcfg, log), Membership: membership, Registerer: n.Reg, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	n.Shard = r
	gs := grpcserver.New(n.Reg)
	r.Register(gs)
	fns := []func(context.Context) error{r.Run, func(ctx context.Context) error { return grpcserver.Serve(ctx, gs, lis, time.Second) }}
	if n.Members != nil {
		fns = append(fns, n.Members.Run)
	}
	n.stop = testutil.GoAll(t, "a replica", fns...)
	testutil.EventuallyNoError(t, Within, cfg.Name+" ready", r.Ready)
	return n
}

// Base returns n: what WaitRing and Owner need of a type that embeds a *Node.
func (n *Node) Base() *Node { return n }

// Member is a *Node, or a type that embeds one.
type Member interface{ Base() *Node }

// Kill crashes n: its gossip stops without a leave (the others detect the failure), then the
// replica and its server stop.
func (n *Node) Kill() {
	if n.Members != nil {
		_ = n.Members.Close()
	}
	n.stop()
}

// GetStreams is the number of open Get streams n serves.
func (n *Node) GetStreams(t testing.TB) float64 {
	return proxytest.Gathered(t, n.Reg, "destination_streams", map[string]string{"method": "get"})
}

// WaitRing waits until every one of nodes (ring members) sees the same ring of all of them
// and is ready.
func WaitRing[M Member](t *testing.T, nodes []M) {
	t.Helper()
	testutil.EventuallyNoError(t, Within, fmt.Sprintf("a ring of %d to converge", len(nodes)), func() error {
		id := nodes[0].Base().Members.Ring().ID()
		for _, m := range nodes {
			n := m.Base()
			if r := n.Members.Ring(); r.Len() != len(nodes) || r.ID() != id {
				return fmt.Errorf("%s sees %d members", n.Name, r.Len())
			}
			if err := n.Shard.Ready(); err != nil {
				return fmt.Errorf("%s: %w", n.Name, err)
			}
		}
		return nil
	})
}

// Owner returns the one of nodes that owns the service key ("namespace/name") by the ring of
// nodes[0]; the zero M when none of them does.
func Owner[M Member](nodes []M, key string) M {
	o := nodes[0].Base().Members.Ring().Owner(key)
	for _, m := range nodes {
		if m.Base().Name == o.Name {
			return m
		}
	}
	var none M
	return none
}
