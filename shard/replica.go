package shard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	pb "github.com/linkerd/linkerd2-proxy-api/go/destination"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/meridian-mesh/meridian/internal/metrics"
	"github.com/meridian-mesh/meridian/internal/run"
	"github.com/meridian-mesh/meridian/ring"
	"github.com/meridian-mesh/meridian/shard/source"
	"github.com/meridian-mesh/meridian/snapshot"
)

// Deps are what a replica is built on.
type Deps struct {
	// Source delivers the cluster's objects. Required.
	Source source.Source
	// Membership makes the replica one shard of a ring: it keeps and serves only the
	// services it owns and forwards or redirects the rest. Nil: a single replica owning
	// everything.
	Membership Membership
	// Registerer receives the replica's metrics; nil: not registered.
	Registerer prometheus.Registerer
	// Logger; nil: no logs.
	Logger *zap.Logger
	// RelayCreds are the transport credentials of the connections to other replicas (relayed
	// streams): the replica's mTLS, presenting its certificate and accepting only an owner
	// that proves the destination identity (internal/cptls's ClientCredentials). Nil:
	// plaintext, for tests and a local mesh.
	RelayCreds credentials.TransportCredentials
}

// Replica is one destination replica: a source feeding an index, and the Destination server
// reading it, in a ring or alone. The caller owns the gRPC and admin servers and registers
// the replica on them (Register, RingHandler), and runs it (Run), gating readiness on Ready.
type Replica struct {
	log     *zap.Logger
	src     source.Source
	store   *snapshot.Store
	idx     *Index
	srv     *Server
	m       *replicaMetrics
	members Membership // nil: a single replica owning everything
	own     *ownership
	follow  *follower // nil without members
	conns   *connPool

	stop chan struct{} // closed when Run returns: open streams end with Unavailable
	once sync.Once
}

var (
	_ run.Component = (*Replica)(nil)
	_ run.Readier   = (*Replica)(nil)
	_ run.Warner    = (*Replica)(nil)
)

// NewReplica returns a replica configured by cfg, built on deps. It fails when deps has no
// Source, cfg.NonOwner is not a mode, or the metrics cannot be registered.
func NewReplica(cfg Config, deps Deps) (*Replica, error) {
	if deps.Source == nil {
		return nil, errors.New("destination replica: no discovery source")
	}
	if _, err := ParseNonOwnerMode(string(cfg.NonOwner)); err != nil {
		return nil, fmt.Errorf("destination replica: %w", err)
	}
	key, err := ParseShardKey(string(cfg.ShardKey))
	if err != nil {
		return nil, fmt.Errorf("destination replica: %w", err)
	}
	log := deps.Logger
	if log == nil {
		log = zap.NewNop()
	}
	set := metrics.Exclusive(deps.Registerer)
	m := newMetrics(set)
	store := snapshot.NewStore(snapshot.StoreConfig{OnOverflow: func(snapshot.Key) { m.overflow.Inc() }})
	idx := NewIndex(cfg, store, deps.Source.Pod, m, log)
	if pl, ok := deps.Source.(source.PodLoader); ok {
		idx.SetPodLoader(pl)
	}
	ownedServices(set, func() float64 { return float64(idx.Len()) })
	if err := set.Err(); err != nil {
		set.Unregister() // all of them or none
		return nil, fmt.Errorf("register destination metrics: %w", err)
	}
	r := &Replica{log: log, src: deps.Source, store: store, idx: idx, m: m, members: deps.Membership,
		conns: newConnPool(deps.RelayCreds), stop: make(chan struct{})}
	if deps.Membership == nil {
		r.own = newOwnership(standaloneName, key, nil)
	} else {
		self, cur := deps.Membership.Self().Name, deps.Membership.Ring()
		idx.SetOwns(ownsFunc(cur, self, key))
		if key == ShardByNamespace {
			idx.SetShardSelector(ownedSelector(cur, self))
		}
		r.own = newOwnership(self, key, cur)
		r.follow = &follower{members: deps.Membership, own: r.own, idx: idx, src: deps.Source, m: m, log: log}
		r.follow.filtered.Store(cur)
	}
	r.srv = &Server{
		cfg:   cfg,
		own:   r.own,
		local: &local{cfg: cfg, idx: idx, own: r.own, loading: r.loading, stop: r.stop},
		relay: &relay{conns: r.conns, own: r.own, m: m},
		m:     m,
		log:   log,
		stop:  r.stop,
	}
	return r, nil
}

// Register registers the Destination service on g.
func (r *Replica) Register(g grpc.ServiceRegistrar) { pb.RegisterDestinationServer(g, r.srv) }

// Index returns the replica's index.
func (r *Replica) Index() *Index { return r.idx }

// Store returns the replica's snapshot store.
func (r *Replica) Store() *snapshot.Store { return r.store }

// Ready reports nil once the replica has joined its ring (if it has one) and the source has
// delivered the initial state of what it owns. It implements run.Readier.
func (r *Replica) Ready() error {
	if r.members != nil && !r.members.Joined() {
		return errors.New("not joined to the ring yet")
	}
	if r.members != nil && !r.members.Settled() {
		return errors.New("cold start: waiting for the ring to form before loading")
	}
	if !r.src.Synced() {
		return errors.New("discovery source has not synced")
	}
	if r.follow.loading() {
		return errors.New("loading services gained on a ring change")
	}
	return nil
}

// Warnings returns the source's warnings when it has any (a Dir source's manifests that do
// not parse, whose last good objects are served). It implements run.Warner.
func (r *Replica) Warnings() []string { return run.WarningsOf(r.src) }

// loading reports whether a missing service may only be not loaded yet.
func (r *Replica) loading() bool { return !r.src.Synced() || r.follow.loading() }

// Run runs the source, the index workers and, with a membership, the ring follower until ctx
// ends; then open streams end with Unavailable so that clients reconnect. It implements
// run.Component.
func (r *Replica) Run(ctx context.Context) error {
	defer r.conns.close()
	defer r.once.Do(func() { close(r.stop); r.own.stop() })
	var g run.Group
	g.Go("index", r.idx.Run)
	g.Go("source", func(ctx context.Context) error {
		if !r.awaitRing(ctx) {
			return nil
		}
		return r.src.Run(ctx, r.idx)
	})
	if r.follow != nil {
		g.Add("ring follower", r.follow)
	}
	return g.Run(ctx)
}

// awaitRing waits, for a replica in a ring, until it has joined, its cold start's wait is
// over and its index's filter follows the ring, so that the source's first list keeps only
// its share (a replica alone in its ring before joining would own, and decode, the whole
// cluster; so would the first of replicas started together, without the wait); then
// it marks the source started, after which the follower loads what a ring change gains. It
// reports false when ctx ended first.
func (r *Replica) awaitRing(ctx context.Context) bool {
	if r.follow == nil {
		return true
	}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !r.members.Joined() || !r.members.Settled() || !r.follow.filtered.Load().Equal(r.members.Ring()) {
		select {
		case <-ctx.Done():
			return false
		case <-tick.C:
		}
	}
	r.follow.started.Store(true)
	return true
}

// RingHandler serves the ring as this replica sees it, with the share of the known services
// each member owns, as JSON (what `meridian ring` prints).
func (r *Replica) RingHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		type member struct {
			ring.MemberStatus
			Services int `json:"services"`
		}
		out := struct {
			Self     string   `json:"self"`
			ID       string   `json:"id"`
			Shape    string   `json:"shape"`
			Services int      `json:"services"`
			Members  []member `json:"members"`
		}{}
		v := r.own.load()
		if v.ring == nil {
			http.Error(w, "this replica runs without a ring", http.StatusNotFound)
			return
		}
		keys := r.idx.KnownServices()
		shares := make(map[string]int)
		for _, k := range keys {
			shares[v.ring.OwnerOfHash(v.key.hash(k)).Name]++
		}
		st := v.ring.Status()
		out.Self, out.ID, out.Shape, out.Services = v.self, st.ID, st.Shape, len(keys)
		for _, m := range st.Members {
			out.Members = append(out.Members, member{MemberStatus: m, Services: shares[m.Name]})
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(out)
	})
}
