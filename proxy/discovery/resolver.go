package discovery

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	pb "github.com/linkerd/linkerd2-proxy-api/go/destination"
	"go.uber.org/zap"

	"github.com/meridian-mesh/meridian/internal/quote"
	"github.com/meridian-mesh/meridian/internal/run"
)

// ErrStopped is returned by Resolve once the resolver's Run has ended (or when it could not
// start).
var ErrStopped = errors.New("discovery: resolver stopped")

// Resolver resolves target authorities through the Destination API and keeps them current.
// Resolve, Target's methods and Release are safe for concurrent use; Run owns every stream
// goroutine.
type Resolver struct {
	cfg   Config
	conns Conns
	log   *zap.Logger

	started chan struct{} // closed when Run starts
	done    chan struct{} // closed when Run stops
	wg      sync.WaitGroup

	mu       sync.Mutex
	ctx      context.Context // Run's; nil before Run
	stopped  bool
	targets  map[string]*target   // by normalised authority
	services map[string]*ownerRef // by "namespace/name", while a target of the service exists
}

// ownerRef is what the resolver knows of one service: the replica that owns it, learnt from a
// redirect ("" when none), and how many targets belong to the service (the entry goes with
// the last).
type ownerRef struct {
	owner   string
	targets int
}

var _ run.Component = (*Resolver)(nil)

// NewResolver returns a resolver asking cfg.Addr (zero fields of cfg take DefaultConfig's
// values) over the connections conns gives; log may be nil. It does nothing until Run.
func NewResolver(cfg Config, conns Conns, log *zap.Logger) *Resolver {
	if log == nil {
		log = zap.NewNop()
	}
	return &Resolver{cfg: cfg.withDefaults(), conns: conns, log: log,
		started: make(chan struct{}), done: make(chan struct{}),
		targets: map[string]*target{}, services: map[string]*ownerRef{}}
}

// Run serves Resolve until ctx ends, then cancels every stream and waits for their goroutines
// (and returns nil). It fails at once without a destination address or Conns, or when called
// a second time. It implements run.Component.
func (r *Resolver) Run(ctx context.Context) error {
	r.mu.Lock()
	switch {
	case r.ctx != nil || r.stopped:
		r.mu.Unlock()
		return errors.New("discovery: Run called twice")
	case r.cfg.Addr == "" || r.conns == nil:
		r.stopped = true
		r.mu.Unlock()
		close(r.done)
		return errors.New("discovery: no destination address or connections configured")
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	r.ctx = rctx
	r.mu.Unlock()
	close(r.started)

	<-ctx.Done()
	r.mu.Lock()
	r.stopped = true
	for _, t := range r.targets {
		if t.idle != nil {
			t.idle.Stop()
		}
	}
	clear(r.targets)
	clear(r.services)
	r.mu.Unlock()
	cancel()
	close(r.done)
	r.wg.Wait()
	return nil
}

// Resolve returns a handle on the target authority (host[:port], port Config.DefaultPort when
// absent) once the destination has answered its Get stream and its profile stream has
// answered or failed, or an error when ctx ends first (the streams go on: a later Resolve
// finds the answer). Concurrent and later calls for the same authority share its streams.
// The caller must Release the handle. It waits for Run to start.
//
// An IP address is looked up as Linkerd's proxy does, with GetProfile alone (no Get stream):
// a profile naming an endpoint (a pod's address, or any address the destination knows no
// Service for) makes the target that one endpoint, with its identity and hints; a profile
// naming a Service (a cluster IP: fully_qualified_name without an endpoint) resolves that
// Service's name at the address's port instead, so the handle is the name's. Resolve waits
// for the first profile.
//
// An error wrapping ErrNotMeshName means the destination rejected the name (InvalidArgument,
// or FailedPrecondition without a redirect; for an IP address also NotFound and
// Unimplemented) on its first resolution, or it is not an authority: send the traffic to it
// directly. The rejection is remembered as long as the target would be (the idle timeout
// after the last Resolve). A service the destination does not know (NotFound) resolves, with
// Exists false and no endpoints, and is asked again with backoff.
func (r *Resolver) Resolve(ctx context.Context, authority string) (*Target, error) {
	n, err := parseTarget(authority, r.cfg.DefaultPort, r.cfg.ClusterDomain)
	if err != nil {
		return nil, err
	}
	h, err := r.resolve(ctx, n)
	if err != nil || !n.ip.IsValid() {
		return h, err
	}
	fqn := h.t.serviceName()
	if fqn == "" {
		return h, nil
	}
	// A cluster IP: the Service's name, at the address's port.
	name, err := parseTarget(net.JoinHostPort(fqn, strconv.Itoa(int(n.ip.Port()))), 0, r.cfg.ClusterDomain)
	if err != nil || name.ip.IsValid() {
		r.log.Debug("a profile names a service that is not a name; serving the address alone",
			zap.String("target", n.path), zap.String("name", quote.String(fqn)))
		return h, nil
	}
	h.Release()
	return r.resolve(ctx, name)
}

// resolve is Resolve for a parsed target.
func (r *Resolver) resolve(ctx context.Context, n targetName) (*Target, error) {
	path := n.path
	select {
	case <-r.started:
	case <-r.done:
		return nil, ErrStopped
	case <-ctx.Done():
		return nil, fmt.Errorf("discovery of %s: resolver not started: %w", path, ctx.Err())
	}
	t, err := r.acquire(n)
	if err != nil {
		return nil, err
	}
	select {
	case <-t.ready:
	case <-r.done:
		r.release(t)
		return nil, ErrStopped
	case <-ctx.Done():
		r.release(t)
		if last := t.lastError(); last != nil {
			return nil, fmt.Errorf("discovery of %s: %w (last stream error: %v)", path, ctx.Err(), last)
		}
		return nil, fmt.Errorf("discovery of %s: %w", path, ctx.Err())
	}
	if msg := t.rejected.Load(); msg != nil {
		r.release(t)
		return nil, fmt.Errorf("discovery of %s: %w: %s", path, ErrNotMeshName, *msg)
	}
	return &Target{t: t}, nil
}

// acquire returns the target of n with one more reference, creating it (and starting its
// stream goroutines: Get and GetProfile, or GetProfile alone for an IP address) when there
// is none.
func (r *Resolver) acquire(n targetName) (*target, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return nil, ErrStopped
	}
	t, ok := r.targets[n.path]
	if !ok {
		t = newTarget(r, r.ctx, n)
		r.targets[n.path] = t
		if n.service != "" {
			ref := r.services[n.service]
			if ref == nil {
				ref = &ownerRef{}
				r.services[n.service] = ref
			}
			ref.targets++
		}
		if !t.byIP() {
			r.wg.Add(1)
			go func() { defer r.wg.Done(); follow[pb.Update](t, getSession{t}) }()
		}
		r.wg.Add(1)
		go func() { defer r.wg.Done(); follow[pb.DestinationProfile](t, profileSession{t}) }()
	}
	t.refs++
	t.idleGen++
	if t.idle != nil {
		t.idle.Stop()
		t.idle = nil
	}
	return t, nil
}

// release drops one reference to t; the last starts the idle timer that drops t.
func (r *Resolver) release(t *target) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t.refs--
	if t.refs > 0 || r.stopped {
		return
	}
	t.idleGen++
	gen := t.idleGen
	t.idle = time.AfterFunc(r.cfg.IdleTimeout, func() { r.dropIdle(t, gen) })
}

// dropIdle drops t, cancelling its streams, if no one took it since the timer of gen started.
func (r *Resolver) dropIdle(t *target, gen uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped || t.refs > 0 || t.idleGen != gen || r.targets[t.path] != t {
		return
	}
	delete(r.targets, t.path)
	t.idle = nil
	if ref := r.services[t.service]; ref != nil {
		if ref.targets--; ref.targets == 0 {
			delete(r.services, t.service)
		}
	}
	t.cancel()
	r.log.Debug("dropped an idle target", zap.String("target", t.path))
}

// addrFor returns where a stream of service should go: the owner remembered for it, else
// direct (the owner a redirect named, for a target without a service key), else the
// destination service. remembered says it is an owner, to forget when it fails.
func (r *Resolver) addrFor(service, direct string) (addr string, remembered bool) {
	if service != "" {
		r.mu.Lock()
		defer r.mu.Unlock()
		if ref := r.services[service]; ref != nil && ref.owner != "" {
			return ref.owner, true
		}
		return r.cfg.Addr, false
	}
	if direct != "" {
		return direct, true
	}
	return r.cfg.Addr, false
}

// learn remembers owner as the owner of service.
func (r *Resolver) learn(service, owner string) {
	if service == "" {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if ref := r.services[service]; ref != nil {
		ref.owner = owner
	}
}

// forget forgets addr as the owner of service, unless another stream learnt a newer one.
func (r *Resolver) forget(service, addr string) {
	if service == "" {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if ref := r.services[service]; ref != nil && ref.owner == addr {
		ref.owner = ""
		r.log.Debug("forgot an owner", zap.String("service", service), zap.String("owner", addr))
	}
}
