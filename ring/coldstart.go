package ring

import (
	"time"

	"go.uber.org/zap"
)

// A cold start's wait (Config.ColdStartWait). Replicas started together (at install, or
// after all of them went down) each join a ring of members that serve nothing yet. Without
// the wait, the first one up would own, and load, the whole cluster until the others
// joined, and keep some of that memory after. With it, a member reports Settled, the sign
// to load its share, only once the ring has formed: when ExpectMembers are present, when
// the ring has not changed for a sixth of the wait while joined, when any member advertises
// that it serves (the cold start is over, or there never was one: a replica restarted into
// a serving ring settles at once) and formed its ring with no more members than this one
// sees, or when the wait has run out. Until then it advertises that it is starting
// (meta.Starting); once settled, the size of the ring it settled with (meta.Formed).

// coldStart is a cold start's wait in progress. Only Run's goroutine uses it.
type coldStart struct {
	began, lastChange time.Time
	quiet, longest    time.Duration
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

// timer returns the channel on which the wait's next check is due (nil once settled).
func (cs *coldStart) timer() <-chan time.Time {
	if cs == nil {
		return nil
	}
	return cs.t.C
}

// stop releases the wait's timer.
func (cs *coldStart) stop() {
	if cs != nil {
		cs.t.Stop()
	}
}

// stepColdStart checks the wait at now (changed: the ring has just changed) and settles
// this member when it is over. It returns the wait still in progress, or nil.
func (c *Cluster) stepColdStart(cs *coldStart, now time.Time, changed bool) *coldStart {
	if cs == nil {
		return nil
	}
	if changed {
		cs.lastChange = now
	}
	reason := c.coldStartOver(cs, now)
	if reason == "" {
		next := min(cs.quiet-now.Sub(cs.lastChange), cs.longest-now.Sub(cs.began))
		cs.t.Reset(max(next, 20*time.Millisecond)) // not joined yet: look again soon
		return cs
	}
	cs.t.Stop()
	c.settle(reason)
	return nil
}

// coldStartOver returns why the wait is over at now, or "" while it is not.
func (c *Cluster) coldStartOver(cs *coldStart, now time.Time) string {
	members := c.ring.Load().Len()
	switch {
	case c.servingPeer(members):
		return "a member serves"
	case c.cfg.ExpectMembers > 0 && members >= c.cfg.ExpectMembers:
		return "the expected members are present"
	case now.Sub(cs.began) >= cs.longest:
		return "waited the longest (cold-start wait)"
	case c.joined.Load() && now.Sub(cs.lastChange) >= cs.quiet:
		return "the ring has not changed for a while"
	}
	return ""
}

// servingPeer reports whether another member with valid metadata serves (does not
// advertise that it is starting: one of this version that settled, or one of an earlier
// version) and formed its ring with at most members members.
func (c *Cluster) servingPeer(members int) bool {
	c.viewMu.Lock()
	defer c.viewMu.Unlock()
	for name, n := range c.view {
		if name == c.self.Name {
			continue
		}
		if _, _, err := decodeMeta(n.meta); err != nil {
			continue
		}
		if st := startStateOf(n.meta); !st.starting && st.formed <= members {
			return true
		}
	}
	return false
}

// settle ends the wait: Settled turns true, and the member advertises that it serves.
func (c *Cluster) settle(reason string) {
	members := c.ring.Load().Len()
	c.settled.Store(true)
	c.log.Info("cold start over: loading this replica's share", zap.String("reason", reason), zap.Int("members", members))
	b, err := encodeMeta(c.cfg.GRPCAddr, c.cfg.Hash.String(), startState{formed: members})
	if err != nil || c.isStopping() {
		return // checked in New; or closed while Run runs (a crash, for the peers)
	}
	c.meta.b.Store(&b)
	if err := c.ml.UpdateNode(time.Second); err != nil {
		c.log.Debug("announce the end of the cold start", zap.Error(err))
	}
}

// Settled reports whether this member may load its share: true from New without
// Config.ColdStartWait, else once the cold start's wait is over (see Config). It never
// turns false again.
func (c *Cluster) Settled() bool { return c.settled.Load() }
