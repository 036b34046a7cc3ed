package discovery

import (
	"context"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	pb "github.com/linkerd/linkerd2-proxy-api/go/destination"
)

// Target is one holder's handle on a target authority, from Resolve. Every holder of the same
// authority shares one target: one Get and one GetProfile stream. Snapshot and Changed are
// safe for concurrent use, lock-free and allocation-free; Release is idempotent.
type Target struct {
	t        *target
	released atomic.Bool
}

// Authority returns the target's normalised authority (host:port), the path its streams ask
// for.
func (h *Target) Authority() string { return h.t.path }

// Snapshot returns the target's current state. It never returns nil; the value is immutable.
func (h *Target) Snapshot() *Snapshot { return h.t.cur.Load().snap }

// Changed returns a channel that is closed when the target's state next changes; then call
// Changed and Snapshot again. Call Changed before Snapshot: a change between the two calls
// then closes the channel already, where the other order could miss it.
func (h *Target) Changed() <-chan struct{} { return h.t.cur.Load().changed }

// Release says the holder is done with the target. When no one holds it, its streams are
// cancelled after the idle timeout, unless a Resolve takes it again before. Snapshot and
// Changed still work after Release, but the state stops following discovery once dropped.
func (h *Target) Release() {
	if h.released.CompareAndSwap(false, true) {
		h.t.r.release(h.t)
	}
}

// published is one state of a target: its snapshot, and the channel closed when the next
// replaces it. It never changes once stored.
type published struct {
	snap    *Snapshot
	changed chan struct{}
}

// target is the state of one authority, shared by its holders. Its two stream loops (get and
// profile, on goroutines Resolver.Run owns) are its only writers; they serialise on mu.
type target struct {
	r       *Resolver
	path    string         // the normalised authority
	service string         // "namespace/name", or "" when the authority is not a service name
	ip      netip.AddrPort // the address, when the authority's host is an IP: GetProfile alone
	req     *pb.GetDestination
	ctx     context.Context
	cancel  context.CancelFunc

	// Guarded by r.mu.
	refs    int
	idle    *time.Timer // the drop pending while refs is 0
	idleGen uint64      // bumped on every acquire and release: a stale timer finds it changed

	cur atomic.Pointer[published]

	// ready is closed once Resolve may return: the Get stream answered and the profile
	// answered or failed, or discovery rejected the name (rejected set first).
	// For an IP target: the profile answered.
	ready     chan struct{}
	readyOnce sync.Once
	rejected  atomic.Pointer[string] // the destination's message, when it rejected the name

	mu       sync.Mutex
	set      endpointSet
	profile  Profile
	profiled bool  // the profile stream answered or failed at least once
	lastErr  error // the last stream failure, for Resolve's error when it times out
}

func newTarget(r *Resolver, ctx context.Context, n targetName) *target {
	t := &target{r: r, path: n.path, service: n.service, ip: n.ip, ready: make(chan struct{}),
		req: &pb.GetDestination{Scheme: "k8s", Path: n.path, ContextToken: r.cfg.ContextToken}}
	t.ctx, t.cancel = context.WithCancel(ctx)
	t.cur.Store(&published{snap: &Snapshot{}, changed: make(chan struct{})})
	return t
}

// byIP reports whether the target is an IP address, resolved by its profile alone.
func (t *target) byIP() bool { return t.ip.IsValid() }

// publishLocked stores a new snapshot of the state and wakes the waiters of the previous
// one. The caller holds t.mu.
func (t *target) publishLocked() {
	old := t.cur.Load()
	snap := &Snapshot{
		Version:   old.snap.Version + 1,
		Resolved:  t.set.resolved,
		Exists:    t.set.exists,
		Endpoints: t.set.eps,
		Profile:   t.profile,
	}
	if t.byIP() {
		snap.Resolved, snap.Exists, snap.Endpoints = t.profiled, true, t.ipEndpointsLocked()
	}
	t.cur.Store(&published{snap: snap, changed: make(chan struct{})})
	close(old.changed)
}

// ipEndpointsLocked returns the endpoints of an IP target: the profile's endpoint; none for a
// Service's cluster IP (Resolve resolves its name instead); and for a profile that names
// neither (a destination that knows nothing of the address), the bare address, plaintext
// (the profile's Opaque says whether to detect a protocol). The caller holds t.mu.
func (t *target) ipEndpointsLocked() []Endpoint {
	p := t.profile
	switch {
	case p.Endpoint != nil:
		return []Endpoint{*p.Endpoint}
	case p.FullyQualifiedName != "" || !t.profiled:
		return nil
	}
	return []Endpoint{{Addr: t.ip, Weight: DefaultWeight}}
}

// serviceName returns the Service an IP target's profile names when it names no endpoint
// (the address is the Service's cluster IP), else "".
func (t *target) serviceName() string {
	if !t.byIP() {
		return ""
	}
	p := t.cur.Load().snap.Profile
	if p.Endpoint != nil {
		return ""
	}
	return p.FullyQualifiedName
}

// checkReadyLocked closes ready once both streams have answered (the profile alone for an IP
// target). The caller holds t.mu.
func (t *target) checkReadyLocked() {
	if (t.set.resolved || t.byIP()) && t.profiled {
		t.readyOnce.Do(func() { close(t.ready) })
	}
}

// reject records that discovery rejected the name on its first resolution, stops both
// streams and wakes Resolve.
func (t *target) reject(msg string) {
	t.rejected.Store(&msg)
	t.readyOnce.Do(func() { close(t.ready) })
	t.cancel()
}

// failed records the last stream failure.
func (t *target) failed(err error) {
	t.mu.Lock()
	t.lastErr = err
	t.mu.Unlock()
}

func (t *target) lastError() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.lastErr
}
