package ring

import (
	"time"

	"go.uber.org/zap"
)

// A cold start's wait (Config.ColdStartWait). Replicas started together (at install, or
// after all of them went down) each join a ring of members that serve nothing yet. Without
// the wait, the first one up would own, and load, the whole cluster until the others
// joined, and keep some of that memory after. With it, a member reports Settled, the sign
// to load its share, only once the ring has formed:
//   - when ExpectMembers are present;
//   - when the ring, of two members or more, has not changed for a sixth of the wait (a
//     member alone waits for the others, which may be slow to be scheduled or pulled);
//   - when another member serves (does not advertise that it is starting, nor that it is
//     leaving) and formed its ring with no more members than this one sees: the cold start
//     is over, or there never was one (a replica restarted into a serving ring settles at
//     once). Gossip may bring the news that a member settled before that of the last
//     joiner, hence the count;
//   - or when the wait has run out.
// Until then it advertises that it is starting (meta.Starting). Once settled, it
// advertises the size of the ring it settled with (meta.Formed) for as long as the wait,
// then drops it, so that a replica restarting long after, into a ring scaled down since,
// does not take the count for a formation in progress.

// coldStart is a cold start's wait, then the time its member advertises the ring it formed.
// Only Run's goroutine uses it.
type coldStart struct {
	began, lastChange time.Time
	quiet, longest    time.Duration
	settledAt         time.Time // zero while waiting
	t                 *time.Timer
}

// beginColdStart starts the wait at now, or returns nil when this member is settled
// already (no ColdStartWait).
func (c *Cluster) beginColdStart(now time.Time) *coldStart {
	if c.settled.Load() {
		return nil
	}
	w := c.cfg.ColdStartWait
	cs := &coldStart{began: now, lastChange: now, quiet: w / 6, longest: w}
	cs.t = time.NewTimer(cs.quiet)
	c.log.Info("cold start: waiting for the ring to form before loading this replica's share",
		zap.Duration("at_most", w), zap.Int("expect_members", c.cfg.ExpectMembers))
	return cs
}

// timer returns the channel on which the next step is due (nil once done).
func (cs *coldStart) timer() <-chan time.Time {
	if cs == nil {
		return nil
	}
	return cs.t.C
}

// stop releases the timer.
func (cs *coldStart) stop() {
	if cs != nil {
		cs.t.Stop()
	}
}

// stepColdStart moves the cold start on at now (changed: the ring has just changed): it
// settles this member when the wait is over, and drops the formed count from its metadata
// once it has advertised it for as long as the wait. It returns the cold start still in
// progress, or nil.
func (c *Cluster) stepColdStart(cs *coldStart, now time.Time, changed bool) *coldStart {
	if cs == nil {
		return nil
	}
	if !cs.settledAt.IsZero() {
		if left := cs.longest - now.Sub(cs.settledAt); left > 0 {
			cs.t.Reset(left)
			return cs
		}
		c.advertise(startState{})
		cs.t.Stop()
		return nil
	}
	if changed {
		cs.lastChange = now
	}
	members := c.ring.Load().Len()
	reason := c.coldStartOver(cs, now, members)
	if reason == "" {
		next := min(cs.quiet-now.Sub(cs.lastChange), cs.longest-now.Sub(cs.began))
		cs.t.Reset(max(next, 20*time.Millisecond)) // alone: look again soon
		return cs
	}
	if c.isStopping() {
		cs.t.Stop()
		return nil // closed while Run runs (a crash, for the peers): load nothing
	}
	c.settled.Store(true)
	c.log.Info("cold start over: loading this replica's share", zap.String("reason", reason), zap.Int("members", members))
	c.advertise(startState{formed: members})
	cs.settledAt = now
	cs.t.Reset(cs.longest)
	return cs
}

// coldStartOver returns why the wait is over at now, with members in the ring, or ""
// while it is not.
func (c *Cluster) coldStartOver(cs *coldStart, now time.Time, members int) string {
	switch {
	case c.servingPeer(members):
		return "a member serves"
	case c.cfg.ExpectMembers > 0 && members >= c.cfg.ExpectMembers:
		return "the expected members are present"
	case now.Sub(cs.began) >= cs.longest:
		return "waited the longest (cold-start wait)"
	case members >= 2 && now.Sub(cs.lastChange) >= cs.quiet:
		return "the ring has not changed for a while"
	}
	return ""
}

// servingPeer reports whether another member with valid metadata serves (advertises
// neither that it is starting nor that it is leaving: one of this version that settled, or
// one of an earlier version) and formed its ring with at most members members.
func (c *Cluster) servingPeer(members int) bool {
	c.viewMu.Lock()
	defer c.viewMu.Unlock()
	for name, n := range c.view {
		if name == c.self.Name {
			continue
		}
		if m, err := parseMeta(n.meta); err == nil && !m.Leaving && !m.Starting && m.Formed <= members {
			return true
		}
	}
	return false
}

// advertise sets this member's cold-start state in its metadata and tells the others (not
// waiting for the broadcast: it stays queued, and Run must not block).
func (c *Cluster) advertise(st startState) {
	b, err := encodeMeta(c.cfg.GRPCAddr, c.cfg.Hash.String(), st)
	if err != nil || c.isStopping() {
		return // checked in New; or closed while Run runs
	}
	c.meta.b.Store(&b)
	if err := c.ml.UpdateNode(50 * time.Millisecond); err != nil {
		c.log.Debug("advertise the cold-start state", zap.Error(err))
	}
}

// Settled reports whether this member may load its share: true from New without
// Config.ColdStartWait, else once the cold start's wait is over (see Config). It never
// turns false again.
func (c *Cluster) Settled() bool { return c.settled.Load() }
