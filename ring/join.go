package ring

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"time"

	"go.uber.org/zap"
)

// maxConcurrentJoins bounds the join attempts in flight at once (one per seed address):
// a seed name with many records is contacted a few addresses at a time.
const maxConcurrentJoins = 8

// joinLoop joins the seeds, then keeps joining every seed address that is not a live
// member, until ctx ends. Only Run's joinLoop goroutine calls it.
func (c *Cluster) joinLoop(ctx context.Context) {
	if len(c.cfg.Join) == 0 {
		c.log.Info("no seeds to join: forming a cluster alone")
		c.setJoined()
		return
	}
	var st joinState
	backoff := c.cfg.JoinRetryMin
	for {
		wait := c.cfg.RejoinInterval
		if c.joinOnce(ctx, &st) || c.joined.Load() {
			backoff = c.cfg.JoinRetryMin
		} else {
			// Not joined yet: full jitter over [backoff/2, backoff).
			wait = backoff/2 + rand.N(backoff/2+1)
			backoff = min(2*backoff, c.cfg.JoinRetryMax)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// joinState is what joinLoop remembers between attempts, so that a problem that lasts
// (a partition, a seed name that does not resolve) is logged once at warn when it starts
// and once at info when it ends, not at every attempt.
type joinState struct {
	unreachable bool   // the last attempt while alone reached no peer
	resolveErr  string // the last resolution error logged
}

// joinOnce makes one join attempt. Before the first join it contacts every seed address;
// once joined, only those that are not live members (none, most of the time). It reports
// false when peers were to be contacted and none could be reached, or resolution failed
// for a reason other than a missing name and left nothing to contact.
func (c *Cluster) joinOnce(ctx context.Context, st *joinState) bool {
	if c.isStopping() {
		// Closed (a crash, for the peers) while Run runs: a join would send this member's
		// state to a peer as alive again, which memberlist does even after Shutdown.
		return true
	}
	peers, resolveErr := c.resolveSeeds(ctx)
	c.noteResolveErr(st, resolveErr)
	joined := c.joined.Load()
	if joined {
		peers = c.notMembers(peers)
	}
	if len(peers) == 0 {
		if resolveErr != nil && !joined {
			return false
		}
		if !joined {
			c.log.Info("gossip seeds name no other member: forming a cluster alone", zap.Strings("seeds", c.cfg.Join))
			c.setJoined()
		}
		return true
	}
	alone := c.ml.NumMembers() <= 1
	reached, errs := c.joinPeers(ctx, peers)
	if ctx.Err() != nil {
		return false
	}
	switch {
	case reached > 0 && !c.setJoined():
		c.log.Info("joined gossip cluster", zap.Strings("peers", peers), zap.Int("members", c.ml.NumMembers()))
	case reached > 0 && alone:
		c.log.Info("joined gossip cluster again", zap.Strings("peers", peers), zap.Int("members", c.ml.NumMembers()))
	case reached == 0 && (alone || !joined) && !st.unreachable:
		c.log.Warn("join gossip cluster: no peer reachable (down, partitioned, or another gossip key); retrying",
			zap.Strings("peers", peers), zap.Error(errors.Join(errs...)))
	case reached == 0:
		c.log.Debug("join gossip seeds that are not members: none reachable", zap.Strings("peers", peers), zap.Error(errors.Join(errs...)))
	}
	st.unreachable = reached == 0 && (alone || !joined)
	return reached > 0
}

// noteResolveErr logs a seed resolution error at warn when it first appears (or changes),
// and at debug while it lasts.
func (c *Cluster) noteResolveErr(st *joinState, err error) {
	switch {
	case err == nil:
		st.resolveErr = ""
	case err.Error() != st.resolveErr:
		st.resolveErr = err.Error()
		c.log.Warn("resolve gossip seeds", zap.Strings("seeds", c.cfg.Join), zap.Error(err))
	default:
		c.log.Debug("resolve gossip seeds", zap.Strings("seeds", c.cfg.Join), zap.Error(err))
	}
}

// joinPeers contacts peers concurrently (at most maxConcurrentJoins at a time), one
// address per memberlist Join so that each is bounded by memberlist's TCPTimeout on its
// own, and returns how many answered and the errors of the others.
func (c *Cluster) joinPeers(ctx context.Context, peers []string) (int, []error) {
	var (
		mu      sync.Mutex
		wg      sync.WaitGroup
		reached int
		errs    []error
	)
	sem := make(chan struct{}, maxConcurrentJoins)
	for _, p := range peers {
		select {
		case <-ctx.Done():
		case sem <- struct{}{}:
			wg.Add(1)
			go func() {
				defer func() { <-sem; wg.Done() }()
				_, err := c.ml.Join([]string{p})
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					errs = append(errs, err)
				} else {
					reached++
				}
			}()
		}
	}
	wg.Wait()
	return reached, errs
}

// notMembers returns the peers whose address is not the gossip address of a live member.
func (c *Cluster) notMembers(peers []string) []string {
	c.viewMu.Lock()
	live := make(map[string]bool, len(c.view))
	for _, n := range c.view {
		live[n.gossip.String()] = true
	}
	c.viewMu.Unlock()
	var out []string
	for _, p := range peers {
		if !live[p] {
			out = append(out, p)
		}
	}
	return out
}

// resolveSeeds returns the ip:port of every seed address other than this member's own.
// Names that do not exist are skipped; other resolution errors are returned (with
// whatever did resolve).
func (c *Cluster) resolveSeeds(ctx context.Context) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	selfAP := c.gossipAddr
	seen := make(map[netip.AddrPort]bool)
	var out []string
	var errs []error
	for _, seed := range c.cfg.Join {
		host, port, err := splitSeed(seed, int(selfAP.Port()))
		if err != nil { // validated in New; kept for safety
			errs = append(errs, err)
			continue
		}
		var addrs []netip.Addr
		if a, err := netip.ParseAddr(host); err == nil {
			addrs = []netip.Addr{a}
		} else {
			ips, err := c.cfg.lookupNetIP(ctx, host)
			var dnsErr *net.DNSError
			switch {
			case errors.As(err, &dnsErr) && dnsErr.IsNotFound:
				c.log.Debug("gossip seed name not found", zap.String("seed", seed))
			case err != nil:
				errs = append(errs, fmt.Errorf("resolve %s: %w", host, err))
			}
			addrs = ips
		}
		for _, a := range addrs {
			ap := netip.AddrPortFrom(a.Unmap(), uint16(port))
			if ap == selfAP || seen[ap] {
				continue
			}
			seen[ap] = true
			out = append(out, ap.String())
		}
	}
	return out, errors.Join(errs...)
}
