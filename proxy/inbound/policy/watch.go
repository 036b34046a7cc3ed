package policy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/linkerd/linkerd2-proxy-api/go/inbound"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
)

// WatchConfig configures a Watcher. The zero value of a duration or bound means its default.
type WatchConfig struct {
	// Workload is PortSpec.workload: LINKERD2_PROXY_POLICY_WORKLOAD, JSON {"ns","pod"}.
	// Empty: no streams; every port gets the default policy.
	Workload string
	// Ports are watched from the start and never dropped (LINKERD2_PROXY_INBOUND_PORTS).
	Ports []uint16
	// InitialTimeout bounds how long Lookup waits for a port's first policy (3 s, the
	// control stream's initial timeout); after it the default applies until one arrives.
	InitialTimeout time.Duration
	// IdleTimeout drops the stream of a port no connection has used for that long (90 s,
	// linkerd2-proxy's inbound discovery idle timeout). Configured ports are never dropped.
	IdleTimeout time.Duration
	// MaxPorts bounds the ports watched at once (1024). A port beyond it authorizes nothing
	// (and says so in Warnings) rather than open another stream.
	MaxPorts int
	// BackoffMin and BackoffMax bound the reconnection backoff (100 ms doubling to 10 s,
	// with jitter), reset after a stream delivered a policy.
	BackoffMin, BackoffMax time.Duration
}

// DefaultWatchConfig returns the defaults documented on WatchConfig.
func DefaultWatchConfig() WatchConfig {
	return WatchConfig{InitialTimeout: 3 * time.Second, IdleTimeout: 90 * time.Second, MaxPorts: 1024,
		BackoffMin: 100 * time.Millisecond, BackoffMax: 10 * time.Second}
}

func (c *WatchConfig) fill() {
	d := DefaultWatchConfig()
	if c.InitialTimeout <= 0 {
		c.InitialTimeout = d.InitialTimeout
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = d.IdleTimeout
	}
	if c.MaxPorts <= 0 {
		c.MaxPorts = d.MaxPorts
	}
	if c.BackoffMin <= 0 {
		c.BackoffMin = d.BackoffMin
	}
	if c.BackoffMax < c.BackoffMin {
		c.BackoffMax = max(d.BackoffMax, c.BackoffMin)
	}
}

// Watcher streams each inbound port's policy from the policy service (WatchPort), one
// stream per port in use. Run owns the streams; Lookup and the Port methods are safe for
// concurrent use.
type Watcher struct {
	cfg      WatchConfig
	client   inbound.InboundServerPoliciesClient // nil: no policy service
	fallback *Server
	invalid  *Server
	log      *zap.Logger

	mu       sync.RWMutex
	ports    map[uint16]*Port
	ctx      context.Context // Run's; nil before Run
	stopping bool
	wg       sync.WaitGroup // the stream goroutines

	overflowed atomic.Int64 // lookups refused because MaxPorts ports are watched
}

// NewWatcher returns a Watcher asking conn (nil: no policy service) for cfg.Workload's
// ports; fallback is the default policy for ports with none received yet.
func NewWatcher(cfg WatchConfig, conn grpc.ClientConnInterface, fallback *Server, log *zap.Logger) *Watcher {
	cfg.fill()
	if log == nil {
		log = zap.NewNop()
	}
	w := &Watcher{cfg: cfg, fallback: fallback, invalid: Invalid(fallback.DetectTimeout), log: log, ports: map[uint16]*Port{}}
	if conn != nil && cfg.Workload != "" {
		w.client = inbound.NewInboundServerPoliciesClient(conn)
	}
	for _, n := range cfg.Ports {
		if w.ports[n] == nil {
			p := newPort(n, fallback, SourceDefault)
			p.pinned = true
			w.ports[n] = p
		}
	}
	return w
}

// Lookup returns port's policy holder, starting its stream if the port is new, and waits
// (at most InitialTimeout, or until ctx ends) for its first policy. The caller must call
// Release on the result when its connection ends.
func (w *Watcher) Lookup(ctx context.Context, port uint16) *Port {
	p := w.acquire(port)
	select {
	case <-p.settled:
		return p
	default:
	}
	t := time.NewTimer(w.cfg.InitialTimeout)
	defer t.Stop()
	select {
	case <-p.settled:
	case <-t.C:
		p.settle() // the default applies; later connections do not wait again
		w.log.Info("no inbound policy yet: applying the default", zap.Uint16("port", port), zap.String("default", w.fallback.Name))
	case <-ctx.Done():
	}
	return p
}

// Held returns how many connections hold port now (Lookup without its Release).
func (w *Watcher) Held(port uint16) int32 {
	w.mu.RLock()
	defer w.mu.RUnlock()
	if p := w.ports[port]; p != nil {
		return p.refs.Load()
	}
	return 0
}

func (w *Watcher) acquire(port uint16) *Port {
	w.mu.RLock()
	p := w.ports[port]
	if p != nil {
		p.refs.Add(1)
		w.mu.RUnlock()
		return p
	}
	w.mu.RUnlock()
	w.mu.Lock()
	defer w.mu.Unlock()
	if p = w.ports[port]; p != nil {
		p.refs.Add(1)
		return p
	}
	if len(w.ports) >= w.cfg.MaxPorts {
		p = newPort(port, w.invalid, SourceOverflow)
		p.settle()
		if w.overflowed.Add(1) == 1 {
			w.log.Warn("too many inbound ports in use: new ports authorize nothing", zap.Int("max_ports", w.cfg.MaxPorts), zap.Uint16("port", port))
		}
		p.refs.Add(1)
		return p
	}
	p = newPort(port, w.fallback, SourceDefault)
	p.refs.Add(1)
	w.ports[port] = p
	w.startLocked(p)
	return p
}

// startLocked starts p's stream when Run is running; w.mu is held.
func (w *Watcher) startLocked(p *Port) {
	switch {
	case w.client == nil || w.stopping:
		p.settle()
	case w.ctx != nil:
		ctx, cancel := context.WithCancel(w.ctx)
		p.cancel = cancel
		w.wg.Add(1)
		go w.watch(ctx, p)
	}
}

// Run starts the streams of the ports known so far and of every port looked up later,
// drops idle ports, and returns once ctx ended and every stream stopped.
func (w *Watcher) Run(ctx context.Context) error {
	w.mu.Lock()
	w.ctx = ctx
	for _, p := range w.ports {
		w.startLocked(p)
	}
	w.mu.Unlock()
	tick := time.NewTicker(max(w.cfg.IdleTimeout/4, time.Millisecond))
	defer tick.Stop()
	for done := false; !done; {
		select {
		case <-ctx.Done():
			done = true
		case <-tick.C:
			w.reap()
		}
	}
	w.mu.Lock()
	w.stopping = true
	for _, p := range w.ports {
		p.settle()
	}
	w.mu.Unlock()
	w.wg.Wait()
	return nil
}

// reap drops the ports that no connection holds and none has used for IdleTimeout.
func (w *Watcher) reap() {
	cutoff := time.Now().Add(-w.cfg.IdleTimeout).UnixNano()
	w.mu.Lock()
	defer w.mu.Unlock()
	for n, p := range w.ports {
		if p.pinned || p.refs.Load() > 0 || p.lastUsed.Load() > cutoff {
			continue
		}
		if p.cancel != nil {
			p.cancel()
		}
		delete(w.ports, n)
		w.log.Debug("inbound policy watch dropped: port idle", zap.Uint16("port", n))
	}
}

// watch runs p's stream until ctx ends, reconnecting with backoff.
func (w *Watcher) watch(ctx context.Context, p *Port) {
	defer w.wg.Done()
	backoff := w.cfg.BackoffMin
	failures := 0
	for {
		got, err := w.stream(ctx, p)
		if ctx.Err() != nil {
			return
		}
		p.settle()
		if got {
			backoff, failures = w.cfg.BackoffMin, 0
		}
		failures++
		src := p.Source()
		p.setProblem(fmt.Sprintf("policy service unavailable (%v): applying %s", short(errString(err)), describe(src, p.Policy())))
		if failures == 1 {
			w.log.Warn("inbound policy stream failed", zap.Uint16("port", p.number), zap.Error(err), zap.Stringer("applying", src))
		} else {
			w.log.Debug("inbound policy stream failed", zap.Uint16("port", p.number), zap.Error(err), zap.Int("failures", failures))
		}
		t := time.NewTimer(backoff/2 + rand.N(backoff/2+1))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(backoff*2, w.cfg.BackoffMax)
	}
}

func describe(src Source, srv *Server) string {
	switch src {
	case SourceService:
		return "the last policy received (" + srv.Kind + " " + srv.Name + ")"
	case SourceInvalid:
		return "no policy (the last one received was invalid)"
	}
	return "the default policy (" + srv.Name + ")"
}

func errString(err error) string {
	if err == nil {
		return "stream ended"
	}
	if st, ok := status.FromError(err); ok {
		return st.Code().String() + ": " + st.Message()
	}
	return err.Error()
}

// stream runs one WatchPort stream; it reports whether a valid policy arrived.
func (w *Watcher) stream(ctx context.Context, p *Port) (bool, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := w.client.WatchPort(ctx, &inbound.PortSpec{Workload: w.cfg.Workload, Port: uint32(p.number)})
	if err != nil {
		return false, err
	}
	got := false
	for {
		msg, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return got, nil
		}
		if err != nil {
			return got, err
		}
		srv, err := Compile(msg)
		if err != nil {
			w.log.Warn("invalid inbound policy ignored", zap.Uint16("port", p.number), zap.Error(err))
			if p.Source() != SourceService {
				p.set(w.invalid, SourceInvalid)
			}
			p.setProblem(fmt.Sprintf("invalid policy ignored (%v): applying %s", short(err.Error()), describe(p.Source(), p.Policy())))
			p.settle()
			continue
		}
		got = true
		p.set(srv, SourceService)
		p.setProblem("")
		p.settle()
		w.log.Debug("inbound policy", zap.Uint16("port", p.number), zap.String("server", srv.Name), zap.Stringer("protocol", srv.Protocol))
	}
}

// Warnings lists the ports whose policy may be stale or missing, at most ten lines.
func (w *Watcher) Warnings() []string {
	w.mu.RLock()
	var out []string
	ports := make([]uint16, 0, len(w.ports))
	for n := range w.ports {
		ports = append(ports, n)
	}
	w.mu.RUnlock()
	slices.Sort(ports)
	more := 0
	for _, n := range ports {
		w.mu.RLock()
		p := w.ports[n]
		w.mu.RUnlock()
		if p == nil {
			continue
		}
		if s := p.getProblem(); s != "" {
			if len(out) == 10 {
				more++
				continue
			}
			out = append(out, fmt.Sprintf("inbound policy for port %d: %s", n, s))
		}
	}
	if n := w.overflowed.Load(); n > 0 {
		out = append(out, fmt.Sprintf("inbound policy: %d connections to ports beyond the %d watched were authorized nothing", n, w.cfg.MaxPorts))
	}
	if more > 0 {
		out = append(out, fmt.Sprintf("inbound policy: %d more ports with problems", more))
	}
	if w.client == nil {
		out = append(out, "inbound policy: no policy service or workload (LINKERD2_PROXY_POLICY_WORKLOAD) configured: applying the default policy ("+w.fallback.Name+")")
	}
	return out
}
