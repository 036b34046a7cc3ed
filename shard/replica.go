package shard

import (
	"context"
	"errors"
	"sync"

	pb "github.com/linkerd/linkerd2-proxy-api/go/destination"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/meridian-mesh/meridian/shard/source"
	"github.com/meridian-mesh/meridian/snapshot"
)

// Replica is one destination replica: a source feeding an index, and the Destination server
// reading it. The caller owns the gRPC and admin servers and registers the replica on them.
type Replica struct {
	cfg   Config
	log   *zap.Logger
	src   source.Source
	store *snapshot.Store
	idx   *Index
	srv   *Server
	m     *metrics
	stop  chan struct{}
	once  sync.Once
}

// NewReplica returns a replica reading src. Metrics are registered on reg (may be nil).
func NewReplica(cfg Config, src source.Source, reg prometheus.Registerer, log *zap.Logger) *Replica {
	if log == nil {
		log = zap.NewNop()
	}
	m := newMetrics(reg)
	store := snapshot.NewStore(snapshot.StoreConfig{OnOverflow: func(snapshot.Key) { m.overflow.Inc() }})
	idx := NewIndex(cfg, store, m, log)
	r := &Replica{cfg: cfg, log: log, src: src, store: store, idx: idx, m: m, stop: make(chan struct{})}
	r.srv = NewServer(cfg, idx, m, log, r.stop)
	return r
}

// Register registers the Destination service on g.
func (r *Replica) Register(g *grpc.Server) { pb.RegisterDestinationServer(g, r.srv) }

// Index returns the replica's index.
func (r *Replica) Index() *Index { return r.idx }

// Store returns the replica's snapshot store.
func (r *Replica) Store() *snapshot.Store { return r.store }

// Ready reports nil once the source has delivered its initial state.
func (r *Replica) Ready() error {
	if !r.src.Synced() {
		return errors.New("discovery source has not synced")
	}
	return nil
}

// Run runs the source and the index workers until ctx ends; then open streams end with
// Unavailable so that clients reconnect.
func (r *Replica) Run(ctx context.Context) error {
	defer r.once.Do(func() { close(r.stop) })
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errc := make(chan error, 2)
	wg.Add(2)
	go func() { defer wg.Done(); errc <- r.idx.Run(ctx) }()
	go func() { defer wg.Done(); errc <- r.src.Run(ctx, r.idx) }()
	var first error
	select {
	case first = <-errc:
		cancel()
	case <-ctx.Done():
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		if first == nil {
			first = err
		}
	}
	return first
}
