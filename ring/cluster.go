package ring

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// Cluster is this replica's membership in the gossip cluster of destination replicas and
// the ring computed from it.
//
// New binds the gossip listener and starts memberlist; Run joins the seeds, keeps the
// ring current and, when its context ends, leaves the cluster and shuts memberlist down.
// Ring, Joined, Subscribe and the accessors are safe for concurrent use at any time.
type Cluster struct {
	cfg  Config
	log  *zap.Logger
	ml   *memberlist.Memberlist
	self Member

	ring atomic.Pointer[Ring]
	// joined is what Joined reports. joinMu orders its setting (setJoined) against stopping:
	// a join that completes after Run's context ended or Close must not set it again.
	joinMu   sync.Mutex
	joined   atomic.Bool
	stopping bool
	// shutDown is set once memberlist's Shutdown returned: a probe it had in flight may
	// still finish and log its failure on the closed socket, after the caller's logger is
	// gone (a test's), and memberlistLog drops those lines.
	shutDown atomic.Bool
	// gossipAddr is this member's advertised gossip ip:port, fixed after New.
	gossipAddr netip.AddrPort

	// view is this member's copy of the live members, kept by the event callbacks.
	// memberlist rewrites the *Node values it hands out (Members, LocalNode) in place
	// under its own lock, so reading them later races (hashicorp/memberlist#306); the
	// callbacks run under that lock and are the one safe place to copy them.
	viewMu sync.Mutex
	view   map[string]nodeInfo

	// legacyShape is whether the current ring was built with LegacyHashConfig because the
	// members advertise different shapes; only Run's goroutine uses it.
	legacyShape bool

	// changed is the one-slot wake-up from memberlist's callbacks to Run: a send never
	// blocks, and events arriving while a rebuild is pending coalesce into it.
	changed chan struct{}

	subMu sync.Mutex
	subs  map[chan struct{}]struct{}

	membersGauge   prometheus.Gauge
	changesTotal   prometheus.Counter
	legacyGauge    prometheus.Gauge
	detectorEvents *prometheus.CounterVec
	keyMetrics     keyMetrics

	// meta is this member's metadata, served to memberlist.
	meta *metaDelegate
	// dead holds members memberlist declared dead while their death is confirmed.
	dead deadHold

	// keyring is memberlist's (nil for plaintext gossip); keyMu serialises SetGossipKeys.
	keyring *memberlist.Keyring
	keyMu   sync.Mutex

	// settled is what Settled reports (coldstart.go).
	settled atomic.Bool

	started  atomic.Bool
	stopOnce sync.Once
}

// New validates cfg, binds the gossip listener and starts memberlist. The initial ring
// holds this member alone. Call Run to join the cluster, or Close to release the
// listener if Run will not be called.
func New(cfg Config) (*Cluster, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	metaBytes, err := encodeMeta(cfg.GRPCAddr, cfg.Hash.String(), startState{starting: cfg.ColdStartWait > 0})
	if err != nil {
		return nil, fmt.Errorf("ring: %w", err)
	}
	c := &Cluster{
		cfg:     cfg,
		log:     cfg.Logger.With(zap.String("node", cfg.NodeName)),
		self:    Member{Name: cfg.NodeName, Addr: cfg.GRPCAddr},
		changed: make(chan struct{}, 1),
		subs:    make(map[chan struct{}]struct{}),
		view:    make(map[string]nodeInfo),
		dead:    deadHold{held: map[string]*heldMember{}, timeout: cfg.DeadHold},
		membersGauge: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "ring_members",
			Help: "Members in this replica's current ring (replicas alive in the gossip cluster with valid metadata).",
		}),
		changesTotal: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ring_changes_total",
			Help: "Times this replica's ring changed (a member joined, left or changed its address).",
		}),
		legacyGauge: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "ring_legacy_shape",
			Help: "1 while the members advertise different ring shapes and this replica builds its rings with the legacy shape (LegacyHashConfig) instead of its own.",
		}),
		detectorEvents: newDetectorEvents(),
		keyMetrics:     newKeyMetrics(),
	}
	mc, err := memberlistConfig(cfg, memberlistLog{
		l:        c.log.WithOptions(zap.AddCallerSkip(3)).Named("memberlist"),
		refused:  c.keyMetrics.refused,
		detector: c.detectorEvents,
		shutDown: &c.shutDown,
	})
	if err != nil {
		return nil, err
	}
	c.keyring = mc.Keyring
	c.meta = &metaDelegate{}
	c.meta.b.Store(&metaBytes)
	mc.Delegate = c.meta
	mc.Events = eventDelegate{c}
	cols := append([]prometheus.Collector{c.membersGauge, c.changesTotal, c.legacyGauge, c.detectorEvents}, c.keyMetrics.collectors()...)
	unregister := func(cols []prometheus.Collector) {
		for _, col := range cols {
			cfg.Registerer.Unregister(col)
		}
	}
	if cfg.Registerer != nil {
		for i, col := range cols {
			if err := cfg.Registerer.Register(col); err != nil {
				unregister(cols[:i])
				return nil, fmt.Errorf("ring: register metrics: %w", err)
			}
		}
	}
	ml, err := memberlist.Create(mc)
	if err != nil {
		if cfg.Registerer != nil {
			unregister(cols)
		}
		return nil, fmt.Errorf("ring: start gossip on %s: %w", cfg.GossipAddr, err)
	}
	c.ml = ml
	// Create announced this member alive, which the event callback recorded.
	c.viewMu.Lock()
	c.gossipAddr = c.view[cfg.NodeName].gossip
	c.viewMu.Unlock()
	if !c.gossipAddr.IsValid() { // not expected; read it once, before any peer exists
		n := ml.LocalNode()
		c.gossipAddr = netip.AddrPortFrom(addrFromIP(n.Addr), n.Port)
	}
	c.ring.Store(Build([]Member{c.self}, cfg.Hash))
	c.settled.Store(cfg.ColdStartWait == 0)
	c.membersGauge.Set(1)
	if c.keyring != nil {
		c.keyMetrics.keys.Set(float64(len(c.keyring.GetKeys())))
	} else {
		c.keyMetrics.insecure.Set(1)
		c.log.Warn("gossip is not encrypted (insecure gossip): any process that reaches the gossip port can join the ring and serve its own endpoints; give a gossip key outside tests and local meshes",
			zap.String("gossip_addr", c.GossipAddr()))
	}
	c.log.Info("gossip listening", zap.String("gossip_addr", c.GossipAddr()), zap.String("grpc_addr", cfg.GRPCAddr),
		zap.Bool("encrypted", c.keyring != nil))
	return c, nil
}

// memberlistConfig maps cfg onto memberlist's configuration, with lg as its logger.
func memberlistConfig(cfg Config, lg memberlistLog) (*memberlist.Config, error) {
	mc := memberlist.DefaultLANConfig()
	if cfg.Fast {
		mc = memberlist.DefaultLocalConfig()
		mc.GossipInterval = 50 * time.Millisecond
		mc.PushPullInterval = 2 * time.Second
		mc.GossipToTheDeadTime = 5 * time.Second
	}
	// The LAN defaults' shape (a reply due within half the interval, the other half for
	// indirect probes through other members and a TCP ping), at cfg's pace.
	mc.ProbeInterval, mc.ProbeTimeout = cfg.ProbeInterval, cfg.ProbeInterval/2
	mc.Name = cfg.NodeName
	host, port, err := net.SplitHostPort(cfg.GossipAddr)
	if err != nil {
		return nil, fmt.Errorf("ring: gossip address %q: %w", cfg.GossipAddr, err)
	}
	if host == "" {
		host = "0.0.0.0"
	}
	if _, err := netip.ParseAddr(host); err != nil {
		return nil, fmt.Errorf("ring: gossip address %q: want an IP address to bind", cfg.GossipAddr)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 0 || p > 65535 {
		return nil, fmt.Errorf("ring: gossip address %q: port want 0..65535", cfg.GossipAddr)
	}
	mc.BindAddr, mc.BindPort, mc.AdvertisePort = host, p, p
	if cfg.AdvertiseAddr != "" {
		ahost, aport, err := net.SplitHostPort(cfg.AdvertiseAddr)
		if err != nil { // no port: the bound port
			ahost, aport = cfg.AdvertiseAddr, ""
		}
		if _, err := netip.ParseAddr(ahost); err != nil {
			return nil, fmt.Errorf("ring: advertise address %q: want ip[:port]", cfg.AdvertiseAddr)
		}
		mc.AdvertiseAddr = ahost
		if aport != "" {
			ap, err := strconv.Atoi(aport)
			if err != nil || ap < 1 || ap > 65535 {
				return nil, fmt.Errorf("ring: advertise address %q: port want 1..65535", cfg.AdvertiseAddr)
			}
			mc.AdvertisePort = ap
		} else if p == 0 {
			// memberlist fills in the automatically bound port when AdvertisePort is 0.
			mc.AdvertisePort = 0
		}
	}
	if mc.Keyring, err = newKeyring(cfg); err != nil {
		return nil, err
	}
	mc.Logger = log.New(lg, "", 0)
	return mc, nil
}

// Run joins the cluster and keeps the ring current until ctx ends; then it leaves the
// cluster (waiting at most half of Config.LeaveTimeout for the metadata that says it is
// leaving to go out, then at most Config.LeaveTimeout for the leave broadcast), shuts
// memberlist down and returns nil. It may be called once.
//
// Joining: with no seeds the member forms a cluster alone and is joined at once.
// Otherwise each attempt resolves every seed to all its addresses and contacts them; an
// attempt that reaches any peer joins. When the seeds resolve to no peer but this member
// (the first replica behind a headless Service), it counts as joined alone. When peers
// exist but none answers (down, or a different gossip key), it is not joined and retries
// with exponential backoff. Once joined, it resolves the seeds every RejoinInterval and
// joins every seed address that is not a live member, so replicas that started apart, or
// were split by a partition, merge (see join.go).
func (c *Cluster) Run(ctx context.Context) error {
	if !c.started.CompareAndSwap(false, true) {
		return errors.New("ring: Run called twice")
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		c.joinLoop(ctx)
	}()
	c.rebuild()
	cs := c.stepColdStart(c.beginColdStart(time.Now()), time.Now(), false)
	defer func() { cs.stop() }()
	for {
		select {
		case <-ctx.Done():
			// Not joined from now on (readiness), even while a join in flight holds the
			// join loop for up to memberlist's TCP timeout before the leave.
			c.markStopping()
			wg.Wait()
			c.stop(true)
			return nil
		case <-c.changed:
			cs = c.stepColdStart(cs, time.Now(), c.rebuild())
		case <-cs.timer():
			cs = c.stepColdStart(cs, time.Now(), false)
		}
	}
}

// Close shuts memberlist down without leaving. It is for a Cluster whose Run was never
// called (Run cleans up after itself); it is idempotent and a no-op after Run returns.
// Called while Run runs, it stops gossip abruptly, like a crash: the other members
// notice by probing, and Run still returns only when its context ends.
func (c *Cluster) Close() error {
	c.stop(false)
	return nil
}

// markStopping turns Joined false for good.
func (c *Cluster) markStopping() {
	c.joinMu.Lock()
	defer c.joinMu.Unlock()
	c.stopping = true
	c.joined.Store(false)
}

func (c *Cluster) isStopping() bool {
	c.joinMu.Lock()
	defer c.joinMu.Unlock()
	return c.stopping
}

// setJoined sets Joined unless the cluster is stopping, and returns its previous value
// (true when stopping, so that no "joined" is logged then).
func (c *Cluster) setJoined() bool {
	c.joinMu.Lock()
	defer c.joinMu.Unlock()
	if c.stopping {
		return true
	}
	return c.joined.Swap(true)
}

func (c *Cluster) stop(leave bool) {
	c.markStopping()
	c.stopOnce.Do(func() {
		if leave {
			// Say it is leaving first, so that the peers drop it at once when it goes
			// rather than check whether it is alive (deadHold).
			if b, err := encodeLeavingMeta(c.cfg.GRPCAddr, c.cfg.Hash.String()); err == nil {
				c.meta.b.Store(&b)
				if err := c.ml.UpdateNode(c.cfg.LeaveTimeout / 2); err != nil {
					c.log.Debug("announce leaving", zap.Error(err))
				}
			}
			if err := c.ml.Leave(c.cfg.LeaveTimeout); err != nil {
				c.log.Warn("leave gossip cluster", zap.Error(err))
			}
		}
		if err := c.ml.Shutdown(); err != nil {
			c.log.Warn("shut down gossip", zap.Error(err))
		}
		c.stopHolds()
		c.shutDown.Store(true)
		c.log.Info("left gossip cluster")
	})
}

// Ring returns the current ring. It takes no lock; the result is immutable and never nil.
func (c *Cluster) Ring() *Ring { return c.ring.Load() }

// Joined reports whether this member has joined the cluster (see Run). It turns false
// again when Run begins shutting down. Use it for readiness.
func (c *Cluster) Joined() bool { return c.joined.Load() }

// Self returns this member as it appears in rings.
func (c *Cluster) Self() Member { return c.self }

// GossipAddr returns the ip:port this member advertises for gossip, with the actual port
// when the configured port was 0. Seeds of other members can point at it.
func (c *Cluster) GossipAddr() string { return c.gossipAddr.String() }

// Subscribe returns a channel that receives a value after the ring changes, and a cancel
// func that stops the notifications (idempotent). The channel holds one value: changes
// that arrive before the subscriber reads coalesce into it, so the subscriber should call
// Ring after each receive and never falls behind by more than one notification. The
// channel is never closed; select on it together with your own context.
func (c *Cluster) Subscribe() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	c.subMu.Lock()
	c.subs[ch] = struct{}{}
	c.subMu.Unlock()
	return ch, func() {
		c.subMu.Lock()
		delete(c.subs, ch)
		c.subMu.Unlock()
	}
}

// wake asks Run to rebuild the ring. It never blocks.
func (c *Cluster) wake() {
	select {
	case c.changed <- struct{}{}:
	default:
	}
}

// rebuild builds the ring from memberlist's current members and publishes it if it
// differs from the current one, which it reports. Only Run's goroutine calls it.
func (c *Cluster) rebuild() bool {
	c.viewMu.Lock()
	nodes := make(map[string]nodeInfo, len(c.view))
	for name, n := range c.view {
		nodes[name] = n
	}
	c.viewMu.Unlock()
	ms := make([]Member, 0, len(nodes))
	own := c.cfg.Hash.String()
	var other string // a shape some member advertises that is not this member's
	for name, n := range nodes {
		addr, shape, err := decodeMeta(n.meta)
		if err != nil {
			c.log.Warn("ignoring gossip member", zap.String("member", name), zap.Stringer("member_gossip_addr", n.gossip), zap.Error(err))
			continue
		}
		if shape != own {
			other = shape
		}
		ms = append(ms, Member{Name: name, Addr: addr})
	}
	r := Build(ms, c.shape(other))
	c.membersGauge.Set(float64(r.Len()))
	old := c.ring.Load()
	if old.Equal(r) {
		return false
	}
	c.ring.Store(r)
	c.changesTotal.Inc()
	c.log.Info("ring changed", zap.Int("members", r.Len()), zap.Stringer("ring", r))
	c.subMu.Lock()
	for ch := range c.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	c.subMu.Unlock()
	return true
}

// shape returns the shape to build the ring with: this member's own when no member
// advertises another (other is empty), else LegacyHashConfig. It logs when that changes.
// Only Run's goroutine calls it (through rebuild).
func (c *Cluster) shape(other string) HashConfig {
	legacy := other != "" && c.cfg.Hash != LegacyHashConfig()
	if legacy != c.legacyShape {
		c.legacyShape = legacy
		if legacy {
			c.log.Warn("ring members advertise different ring shapes (an upgrade in progress, or replicas configured apart): building rings with the legacy shape, which every version computes, until they agree",
				zap.String("shape", c.cfg.Hash.String()), zap.String("other_shape", quoteShape(other)), zap.String("legacy_shape", legacyShape))
		} else {
			c.log.Info("every ring member advertises this member's ring shape: building rings with it", zap.String("shape", c.cfg.Hash.String()))
		}
	}
	if legacy {
		c.legacyGauge.Set(1)
		return LegacyHashConfig()
	}
	c.legacyGauge.Set(0)
	return c.cfg.Hash
}

// quoteShape bounds a shape another member advertised for a log line.
func quoteShape(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

func addrFromIP(ip net.IP) netip.Addr {
	a, _ := netip.AddrFromSlice(ip)
	return a.Unmap()
}

// metaDelegate serves this member's metadata (which changes when a cold start's wait ends,
// and when it leaves); the rest
// of memberlist's Delegate (user messages and state exchange) is unused.
type metaDelegate struct{ b atomic.Pointer[[]byte] }

var _ memberlist.Delegate = (*metaDelegate)(nil)

func (d *metaDelegate) NodeMeta(limit int) []byte {
	b := *d.b.Load()
	if len(b) > limit { // checked in New against memberlist.MetaMaxSize
		return nil
	}
	return b
}
func (*metaDelegate) NotifyMsg([]byte)                {}
func (*metaDelegate) GetBroadcasts(int, int) [][]byte { return nil }
func (*metaDelegate) LocalState(bool) []byte          { return nil }
func (*metaDelegate) MergeRemoteState([]byte, bool)   {}

// nodeInfo is what the ring needs of a live member, copied out of memberlist.
type nodeInfo struct {
	meta   []byte
	gossip netip.AddrPort
}

// eventDelegate keeps Cluster.view and wakes Run. memberlist calls it one event at a
// time with its node lock held, so it must not block or call back into memberlist: it
// copies the node under viewMu (held only for a map write) and does a non-blocking send.
type eventDelegate struct{ c *Cluster }

var _ memberlist.EventDelegate = eventDelegate{}

func (e eventDelegate) NotifyJoin(n *memberlist.Node)   { e.set(n) }
func (e eventDelegate) NotifyUpdate(n *memberlist.Node) { e.set(n) }

// NotifyLeave drops a member that left on purpose (its metadata said it was leaving) at
// once, and holds one memberlist declared dead while its death is confirmed (deadHold).
// The metadata is the only sign of a leave here: memberlist (v0.7.0) records a member as
// left or dead in its own state, not in the Node it passes (whose State stays zero). A peer
// that hears of the leave before the metadata update (gossip may reorder them, or a
// push/pull may bring the leave alone) holds the member as a dead one whose address may
// still accept, for at most the hold (TestLeaveWhileReachable covers the usual order).
func (e eventDelegate) NotifyLeave(n *memberlist.Node) {
	e.c.viewMu.Lock()
	info, ok := e.c.view[n.Name]
	if ok && !leavingMeta(info.meta) && e.c.holdDead(n.Name, info) {
		e.c.viewMu.Unlock()
		return
	}
	delete(e.c.view, n.Name)
	e.c.viewMu.Unlock()
	e.c.wake()
}

func (e eventDelegate) set(n *memberlist.Node) {
	info := nodeInfo{meta: bytes.Clone(n.Meta), gossip: netip.AddrPortFrom(addrFromIP(n.Addr), n.Port)}
	e.c.viewMu.Lock()
	e.c.view[n.Name] = info
	e.c.revived(n.Name)
	e.c.viewMu.Unlock()
	e.c.wake()
}

// memberlistLog adapts memberlist's "[LEVEL] memberlist: message" log lines to zap. It
// counts in refused (when not nil) the errors that are refusals for encryption, and in
// detector (when not nil) the failure detector's events (detectorEvent). Once shutDown
// (when not nil) is set, lines are dropped.
type memberlistLog struct {
	l        *zap.Logger
	refused  prometheus.Counter
	detector *prometheus.CounterVec
	shutDown *atomic.Bool
}

func (w memberlistLog) Write(p []byte) (int, error) {
	if w.shutDown != nil && w.shutDown.Load() {
		return len(p), nil
	}
	msg := strings.TrimRight(string(p), "\n")
	level := "INFO"
	if strings.HasPrefix(msg, "[") {
		if i := strings.IndexByte(msg, ']'); i > 0 {
			level, msg = msg[1:i], strings.TrimSpace(msg[i+1:])
		}
	}
	msg = strings.TrimPrefix(msg, "memberlist: ")
	if ev := detectorEvent(msg); ev != "" && w.detector != nil {
		w.detector.WithLabelValues(ev).Inc()
	}
	switch level {
	case "DEBUG", "TRACE":
		w.l.Debug(msg)
	case "WARN":
		w.l.Warn(msg)
	case "ERR", "ERROR":
		if w.refused != nil && refusedMessage(msg) {
			w.refused.Inc()
		}
		w.l.Error(msg)
	default:
		w.l.Info(msg)
	}
	return len(p), nil
}

// detectorEvents are the failure detector's events that ring_failure_detector_events_total
// counts, each with the start of the memberlist (v0.7) log line that reports it: memberlist
// has no callback for a suspicion or a refutation, and a member declared failed and back
// before its peers noticed shows in no membership event either. "declared_failed" here, or
// "refuted_death" on the member itself, is a flap: the ring dropped a live member.
var detectorEvents = [...]struct{ event, prefix, has string }{
	{"suspected", "Suspect ", " has failed"},                // this member's probe of a peer went unanswered
	{"declared_failed", "Marking ", " as failed"},           // a suspicion this member held timed out
	{"refuted_suspicion", "Refuting a suspect message", ""}, // a peer suspected this member
	{"refuted_death", "Refuting a dead message", ""},        // a peer declared this member dead
	{"tcp_fallback_failed", "Failed fallback TCP ping", ""}, // the TCP probe after a UDP one failed too
}

// detectorEvent returns the detectorEvents event msg reports, or "".
func detectorEvent(msg string) string {
	for _, e := range detectorEvents {
		if strings.HasPrefix(msg, e.prefix) && strings.Contains(msg[len(e.prefix):], e.has) {
			return e.event
		}
	}
	return ""
}

func newDetectorEvents() *prometheus.CounterVec {
	v := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ring_failure_detector_events_total",
		Help: "memberlist failure-detector events seen by this replica: suspected (its probe of a peer went unanswered), declared_failed (a suspicion it held timed out), refuted_suspicion and refuted_death (a peer suspected it, or declared it dead, while it was alive), tcp_fallback_failed; dead_reachable (a member declared dead still accepted a connection, and stayed in the ring for the hold) and dead_revived (one held came back: a flap avoided).",
	}, []string{"event"})
	for _, e := range detectorEvents {
		v.WithLabelValues(e.event) // every series exists from the start, at 0
	}
	v.WithLabelValues("dead_reachable")
	v.WithLabelValues("dead_revived")
	return v
}
