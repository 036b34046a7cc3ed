package shard

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	pb "github.com/linkerd/linkerd2-proxy-api/go/destination"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/meridian-mesh/meridian/internal/run"
	"github.com/meridian-mesh/meridian/shard/source"
	"github.com/meridian-mesh/meridian/snapshot"
)

// Replica is one destination replica: a source feeding an index, and the Destination server
// reading it. With a Membership it is one shard of a ring: it keeps and serves only the
// services it owns and forwards or redirects the rest. The caller owns the gRPC and admin
// servers and registers the replica on them.
type Replica struct {
	cfg     Config
	log     *zap.Logger
	src     source.Source
	store   *snapshot.Store
	idx     *Index
	srv     *Server
	m       *metrics
	members Membership // nil: a single replica owning everything
	ring    *ringState
	conns   *connPool

	replaying atomic.Int32 // replays of the source in progress after a ring change
	stop      chan struct{}
	once      sync.Once
}

// NewReplica returns a replica reading src. Metrics are registered on reg (may be nil).
func NewReplica(cfg Config, src source.Source, reg prometheus.Registerer, log *zap.Logger) *Replica {
	if log == nil {
		log = zap.NewNop()
	}
	m := newMetrics(reg)
	store := snapshot.NewStore(snapshot.StoreConfig{OnOverflow: func(snapshot.Key) { m.overflow.Inc() }})
	idx := NewIndex(cfg, store, src.Pod, m, log)
	r := &Replica{cfg: cfg, log: log, src: src, store: store, idx: idx, m: m, ring: newRingState(), conns: newConnPool(), stop: make(chan struct{})}
	if reg != nil {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "destination_owned_services",
			Help: "Services whose inputs this replica holds (with a ring: the services it owns).",
		}, func() float64 { return float64(idx.Len()) }))
	}
	r.srv = &Server{cfg: cfg, r: r, idx: idx, m: m, log: log, stop: r.stop}
	return r
}

// SetMembership makes the replica a shard of the ring m. Call it before Run.
func (r *Replica) SetMembership(m Membership) {
	r.members = m
	self := m.Self().Name
	cur := m.Ring()
	r.idx.SetOwns(func(k ServiceKey) bool { return cur.Owns(k.String(), self) })
	r.ring.swap(cur, self)
}

// Register registers the Destination service on g.
func (r *Replica) Register(g *grpc.Server) { pb.RegisterDestinationServer(g, r.srv) }

// Index returns the replica's index.
func (r *Replica) Index() *Index { return r.idx }

// Store returns the replica's snapshot store.
func (r *Replica) Store() *snapshot.Store { return r.store }

// Ready reports nil once the replica has joined its ring (if it has one) and the source has
// delivered the initial state of what it owns.
func (r *Replica) Ready() error {
	if r.members != nil && !r.members.Joined() {
		return errors.New("not joined to the ring yet")
	}
	if !r.src.Synced() {
		return errors.New("discovery source has not synced")
	}
	if r.replaying.Load() > 0 {
		return errors.New("loading services gained on a ring change")
	}
	return nil
}

// loading reports whether a missing service may only be not loaded yet.
func (r *Replica) loading() bool { return !r.src.Synced() || r.replaying.Load() > 0 }

// Run runs the source, the index workers and, with a membership, the ring follower until ctx
// ends; then open streams end with Unavailable so that clients reconnect.
func (r *Replica) Run(ctx context.Context) error {
	defer r.conns.close()
	defer r.once.Do(func() { close(r.stop) })
	fns := []func(context.Context) error{
		r.idx.Run,
		func(ctx context.Context) error { return r.src.Run(ctx, r.idx) },
	}
	if r.members != nil {
		fns = append(fns, r.followRing)
	}
	return run.All(ctx, fns...)
}

func (r *Replica) selfName() string {
	if r.members == nil {
		return "standalone"
	}
	return r.members.Self().Name
}
