package ring

import (
	"context"
	"net"
	"sync"
	"time"

	"go.uber.org/zap"
)

// deadDialTimeout bounds the connection attempt that tells a crashed member from a live one
// memberlist declared dead: a member on a host that went away answers nothing.
const deadDialTimeout = time.Second

// deadHold keeps in the ring, for a while, a member that memberlist declared dead but whose
// process is alive: one too starved of CPU (a throttled pod, an overloaded node) to answer
// its probes and refute the suspicion in time, which refutes it moments later. Dropping it
// and taking it back would move its services, and their streams, twice (a flap).
//
// When memberlist reports a member dead (not one that left), the member stays in the view
// while one connection attempt goes to its gRPC address: refused or unanswered within
// deadDialTimeout (a crashed process, a host gone), the member leaves the ring at once;
// accepted (the kernel accepts for a live process however starved it is), it stays until
// memberlist reports it alive again or Config.DeadHold has passed, whichever comes first.
// The checks are owned by the Cluster: stop ends them and waits.
type deadHold struct {
	// mu guards the fields below; it nests inside Cluster.viewMu (held, when both are, in
	// that order), so that a member's return and its drop do not interleave.
	mu      sync.Mutex
	held    map[string]*heldMember
	closed  bool
	wg      sync.WaitGroup
	timeout time.Duration
}

// heldMember is one member in the hold: the cancel of its check.
type heldMember struct{ cancel context.CancelFunc }

// onDead is called (from memberlist's event callback, with Cluster.viewMu held) for member
// name, declared dead, whose view entry is info. It reports whether the member is held (a
// check started); if not, the caller drops it at once.
func (c *Cluster) holdDead(name string, info nodeInfo) bool {
	h := &c.dead
	if h.timeout <= 0 {
		return false
	}
	addr, _, err := decodeMeta(info.meta)
	if err != nil {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return false
	}
	if old := h.held[name]; old != nil {
		old.cancel()
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &heldMember{cancel: cancel}
	h.held[name] = m
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		defer cancel()
		c.confirmDead(ctx, name, addr, m)
	}()
	return true
}

// revived is called (with Cluster.viewMu held) when memberlist reports member name alive:
// a check of it in progress ends, and it stays in the ring as it was.
func (c *Cluster) revived(name string) {
	h := &c.dead
	h.mu.Lock()
	defer h.mu.Unlock()
	if m := h.held[name]; m != nil {
		m.cancel()
		delete(h.held, name)
		c.detectorEvents.WithLabelValues("dead_revived").Inc()
		c.log.Info("member declared dead is alive again; it stayed in the ring", zap.String("member", name))
	}
}

// confirmDead decides about member name, held as m, reached at addr: it drops the member
// when its address refuses or does not answer, else when the hold has passed; it returns
// without dropping when ctx ends (the member revived, or the cluster stops).
func (c *Cluster) confirmDead(ctx context.Context, name, addr string, m *heldMember) {
	d := net.Dialer{Timeout: deadDialTimeout}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if ctx.Err() != nil {
		if conn != nil {
			conn.Close()
		}
		return
	}
	if err == nil {
		conn.Close()
		c.detectorEvents.WithLabelValues("dead_reachable").Inc()
		c.log.Warn("member declared dead still accepts connections (starved of CPU, not crashed?); it stays in the ring until it refutes, for at most the hold",
			zap.String("member", name), zap.String("grpc_addr", addr), zap.Duration("hold", c.dead.timeout))
		t := time.NewTimer(c.dead.timeout)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
	c.viewMu.Lock()
	c.dead.mu.Lock()
	drop := c.dead.held[name] == m
	if drop {
		delete(c.dead.held, name)
		delete(c.view, name)
	}
	c.dead.mu.Unlock()
	c.viewMu.Unlock()
	if drop {
		c.log.Info("member declared dead leaves the ring", zap.String("member", name), zap.Bool("reachable", err == nil), zap.NamedError("dial", err))
		c.wake()
	}
}

// stopHolds ends every check and waits for them; no new one starts after it.
func (c *Cluster) stopHolds() {
	h := &c.dead
	h.mu.Lock()
	h.closed = true
	for _, m := range h.held {
		m.cancel()
	}
	h.mu.Unlock()
	h.wg.Wait()
}
