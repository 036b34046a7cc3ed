package shard

import (
	"context"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/meridian-mesh/meridian/ring"
	"github.com/meridian-mesh/meridian/shard/source"
)

// follower applies every change of the ring to the replica: the index's filter, a replay of
// the source for the services gained, the ownership view the streams follow, and the release
// of what the replica lost. It runs on one goroutine (Run); replaying is read by others.
type follower struct {
	members Membership
	own     *ownership
	idx     *Index
	src     source.Source
	m       *replicaMetrics
	log     *zap.Logger

	replaying atomic.Int32 // replays of the source in progress after a ring change
	// incomplete is set while the share gained on a ring change is not loaded (every
	// attempt failed): the replica is not ready, and Run tries again (reload), from
	// unloaded, the ring before that change, so that a load covers every change since.
	// unloaded is Run's alone.
	incomplete atomic.Bool
	unloaded   *ring.Ring
	// filtered is the ring the index's filter follows; started is set when the source
	// starts (Replica.awaitRing), which waits for filtered to be the ring joined: a gain
	// before then needs no replay, the source's first list being filtered already.
	filtered atomic.Pointer[ring.Ring]
	started  atomic.Bool
}

// Run applies every ring change until ctx ends: it first takes the services it gains (the
// source replays its objects, now admitted by the new ownership), then wakes the streams so
// that those of services it lost move to their new owners, and releases what nobody holds.
//
// A share it failed to load (apply tries once) is loaded again, from Run, after reloadMin
// doubling to reloadMax, until a load succeeds; ring changes are applied meanwhile.
func (f *follower) Run(ctx context.Context) error {
	ch, cancel := f.members.Subscribe()
	defer cancel()
	retry := time.NewTimer(0)
	<-retry.C
	defer retry.Stop()
	wait := reloadMin
	for {
		cur := f.members.Ring()
		if prev := f.own.load(); prev.ring == nil || !prev.ring.Equal(cur) {
			f.apply(ctx, prev.ring, cur)
		}
		if f.incomplete.Load() {
			retry.Reset(wait)
		} else {
			wait = reloadMin
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ch:
		case <-retry.C:
			wait = min(2*wait, reloadMax)
			f.reload(ctx)
		}
		retry.Stop()
	}
}

// reloadMin and reloadMax bound the wait before Run loads again a share that apply failed
// to load.
const (
	reloadMin = 100 * time.Millisecond
	reloadMax = 30 * time.Second
)

// reload loads again what the replica gained since f.unloaded, the ring before the change
// whose share it failed to load.
func (f *follower) reload(ctx context.Context) {
	f.replaying.Add(1)
	load, settle, err := f.replay(ctx, f.unloaded)
	f.replaying.Add(-1)
	f.loaded(ctx, f.unloaded, err)
	if err == nil {
		f.log.Info("loaded the services gained on an earlier ring change", zap.Duration("load", load), zap.Duration("settle", settle))
	}
}

// loaded records the outcome of a load of what was gained since ring from.
func (f *follower) loaded(ctx context.Context, from *ring.Ring, err error) {
	switch {
	case err == nil:
		f.unloaded = nil
		f.incomplete.Store(false)
	case ctx.Err() == nil:
		if !f.incomplete.Load() {
			f.unloaded = from // the oldest ring not loaded from
		}
		f.incomplete.Store(true)
		f.log.Error("loading the services gained on a ring change failed; the replica is not ready, and tries again", zap.Error(err))
	}
}

func (f *follower) apply(ctx context.Context, prev, cur *ring.Ring) {
	self := f.own.self
	gained := prev == nil
	if prev != nil {
		for p := 0; p < cur.Partitions(); p++ {
			if cur.PartitionOwner(p).Name == self && prev.PartitionOwner(p).Name != self {
				gained = true
				break
			}
		}
	}
	key := f.own.key
	f.idx.SetOwns(ownsFunc(cur, self, key))
	if key == ShardByNamespace {
		f.idx.SetShardSelector(ownedSelector(cur, self))
	}
	f.filtered.Store(cur)
	from := prev
	if f.incomplete.Load() {
		from, gained = f.unloaded, true // load what the earlier change gained too
	}
	var load, settle time.Duration
	if gained && f.started.Load() {
		f.replaying.Add(1)
		var err error
		load, settle, err = f.replay(ctx, from)
		f.replaying.Add(-1)
		f.loaded(ctx, from, err)
	}
	f.own.swap(cur)
	dropped := f.idx.DropUnowned()
	if sl, ok := f.src.(source.ShareLoader); ok {
		sl.Release()
	}
	f.m.ownershipChanges.Inc()
	f.log.Info("ring changed", zap.Int("members", cur.Len()), zap.Bool("gained", gained), zap.Int("released", dropped), zap.Int("owned", f.idx.Len()),
		zap.Duration("load", load), zap.Duration("settle", settle))
}

// replay hands the index what it gained from ring prev, once the source's initial delivery
// (filtered by an older ring) has finished: a source that keeps only what the index wants
// (source.ShareLoader) loads the gained share from the API server; any other replays. A load
// that fails (the API server unreachable, a list that times out) returns its error: the
// caller marks the share incomplete, and Run tries again later. It returns how long the
// source took to deliver, and the index then to compute, what was gained.
func (f *follower) replay(ctx context.Context, prev *ring.Ring) (load, settle time.Duration, err error) {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !f.src.Synced() && ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
	}
	start := time.Now()
	err = f.load(ctx, prev)
	load = time.Since(start)
	f.idx.settle(ctx)
	settle = time.Since(start) - load
	return load, settle, err
}

// load has the source deliver what the replica gained from ring prev: a source that keeps
// only what the index wants (source.ShareLoader) loads the gained share, any other replays.
// A failed load may have delivered part of the share: both are safe to run again.
func (f *follower) load(ctx context.Context, prev *ring.Ring) error {
	if sl, ok := f.src.(source.ShareLoader); ok && prev != nil {
		self, key := f.own.self, f.own.key
		g := source.Gained{Before: func(namespace, name string) bool {
			return prev.OwnsHash(key.hash(NewServiceKey(namespace, name)), self)
		}}
		if key == ShardByNamespace {
			g.ShardSelector = gainedSelector(prev, f.members.Ring(), self)
		}
		return sl.Gain(ctx, g)
	}
	return f.src.Replay(ctx)
}

// loading reports whether a replay is in progress, or a gained share is not loaded.
func (f *follower) loading() bool {
	return f != nil && (f.replaying.Load() > 0 || f.incomplete.Load())
}
