package bench

import (
	"context"
	"math/rand/v2"
	"net"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/meridian-mesh/meridian/bench/feed"
	"github.com/meridian-mesh/meridian/bench/gen"
)

// world is where a run's cluster lives and changes: the harness's feed server (feedWorld) or
// a real API server (kubeWorld). It holds the truth (a gen.Cluster) and tells replicas how
// to read the cluster.
type world interface {
	// source fills in how a replica reads the cluster.
	source(s *ReplicaSpec)
	// apply makes one churn change: pre is called with the change before any replica can see
	// it, post (when the change went through an API) once the API server has answered.
	apply(ctx context.Context, rng *rand.Rand, busy func(uint32) bool, pre, post func(gen.Change, time.Time)) error
	// flush waits until every change applied has been sent (and post called), and returns
	// the first failure of one.
	flush() error
	// read calls fn with the truth, which does not change meanwhile.
	read(fn func(*gen.Cluster))
	// resyncs counts the times a replica's feed fell behind and got the whole state.
	resyncs() uint64
	// beginChurn marks the start of a run's churn, which the world's own figures of it count
	// from.
	beginChurn(start time.Time)
	// pids are the world's own processes, the API server's and etcd's (0, 0: none; the feed
	// server runs in the harness).
	pids() (api, etcd int)
	// measure adds the world's own figures (the API server's and etcd's RSS, CPU and watch
	// latency) to res.
	measure(res *RunResult)
}

// feedWorld is the synthetic cluster served by the harness's feed server (bench/feed) on a
// loopback listener, for one run.
type feedWorld struct {
	srv *feed.Server
	lis net.Listener
}

// newFeedWorld builds cfg's cluster and serves it until ctx ends; wg owns the server's
// goroutine.
func newFeedWorld(ctx context.Context, cfg Config, wg *sync.WaitGroup, log *zap.Logger) (*feedWorld, error) {
	cluster, err := gen.NewCluster(cfg.Cluster)
	if err != nil {
		return nil, err
	}
	srv := feed.NewServer(cluster, feed.ServerConfig{QueueFrames: feed.DefaultQueueFrames, DeliverPods: cfg.DeliverPods}, log)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := srv.Serve(ctx, lis); err != nil {
			log.Warn("feed server", zap.Error(err))
		}
	}()
	return &feedWorld{srv: srv, lis: lis}, nil
}

func (w *feedWorld) source(s *ReplicaSpec) { s.FeedAddr = w.lis.Addr().String() }

func (w *feedWorld) apply(_ context.Context, rng *rand.Rand, busy func(uint32) bool, pre, _ func(gen.Change, time.Time)) error {
	_, _, err := w.srv.Apply(rng, busy, pre)
	return err
}

func (w *feedWorld) flush() error { return nil }

func (w *feedWorld) read(fn func(*gen.Cluster)) { w.srv.Read(fn) }
func (w *feedWorld) resyncs() uint64            { return w.srv.Resyncs() }
func (w *feedWorld) beginChurn(time.Time)       {}
func (w *feedWorld) pids() (api, etcd int)      { return 0, 0 }
func (w *feedWorld) measure(*RunResult)         {}
