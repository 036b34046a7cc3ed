package shard

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/meridian-mesh/meridian/internal/testutil"
	"github.com/meridian-mesh/meridian/ring"
	"github.com/meridian-mesh/meridian/shard/source"
)

// ringAtLoad is a Dir source that records the size of its replica's ring when the replica
// starts it: the ring its first list is filtered by. Embedding keeps Dir's other methods.
type ringAtLoad struct {
	*source.Dir
	members Membership
	size    atomic.Int64 // 0 until Run
}

func (s *ringAtLoad) Run(ctx context.Context, h source.Handler) error {
	s.size.Store(int64(s.members.Ring().Len()))
	return s.Dir.Run(ctx, h)
}

// TestRingColdStartLoadsTheShareOnly: replicas started together with a cold-start wait load
// nothing until the ring has formed, so that each first lists only its share; a replica that
// joins a serving ring later loads at once, though it expects more replicas.
func TestRingColdStartLoadsTheShareOnly(t *testing.T) {
	c := newCluster(t, ringServices, 2)
	var srcs []*ringAtLoad
	start := func(name string, expect int, seeds ...string) *shardNode {
		return startRingNodeWith(t, name, DefaultConfig(), seeds, func(log *zap.Logger, _ prometheus.Registerer, m Membership) source.Source {
			dcfg := source.DefaultDirConfig(c.dir)
			dcfg.Rescan = 200 * time.Millisecond
			s := &ringAtLoad{Dir: source.NewDirWithConfig(dcfg, log), members: m}
			srcs = append(srcs, s)
			return s
		}, func(rc *ring.Config) { rc.ColdStartWait, rc.ExpectMembers = 10*time.Minute, expect })
	}
	nodes := []*shardNode{start("r0", 3)}
	nodes = append(nodes, start("r1", 3, nodes[0].gossip()))
	testutil.Eventually(t, 30*time.Second, "r0 and r1 to see each other", func() bool {
		return nodes[0].cluster.Ring().Len() == 2 && nodes[1].cluster.Ring().Len() == 2
	})
	testutil.Never(t, time.Second, "a replica to load with 2 of 3 replicas", func() bool {
		return srcs[0].size.Load() != 0 || srcs[1].size.Load() != 0
	})
	if err := nodes[0].replica.Ready(); err == nil || !strings.Contains(err.Error(), "cold start") {
		t.Errorf("r0 in its cold start's wait: Ready() = %v, want the cold start named", err)
	}
	nodes = append(nodes, start("r2", 3, nodes[0].gossip()))
	waitConverged(t, nodes, 3)
	for i, s := range srcs {
		if got := s.size.Load(); got != 3 {
			t.Errorf("r%d started its source with a ring of %d members, want 3", i, got)
		}
	}
	// A fourth expects ten, but r0..r2 serve: it loads at once, not in ten minutes.
	nodes = append(nodes, start("r3", 10, nodes[0].gossip()))
	waitConverged(t, nodes, 4)
	for i := range ringServices {
		ns, name := svcName(i)
		owners := 0
		for _, n := range nodes {
			if n.replica.Index().Owns(NewServiceKey(ns, name)) {
				owners++
			}
		}
		if owners != 1 {
			t.Errorf("%s/%s is owned by %d replicas, want 1", ns, name, owners)
		}
	}
}
