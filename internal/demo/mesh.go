package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/meridian-mesh/meridian/internal/cptls"
	"github.com/meridian-mesh/meridian/internal/run"
	"github.com/meridian-mesh/meridian/proxy/discovery"
)

// Config configures the demo. Build it with DefaultConfig.
type Config struct {
	Binary   string // the meridian binary the children run (the demo's own)
	Dir      string // the example cluster: a directory of Kubernetes YAML, followed
	CacheDir string // identity, gossip key, tokens, logs (.cache/demo)
	Replicas int    // destination replicas in the ring
	// Net puts the control plane on 127.Net.1.0/24 and, when not 0, runs on a copy of Dir
	// whose pod addresses 127.0.x.y become 127.Net.x.y, so that two demos can share a machine.
	Net  byte
	Rate float64 // requests per second per target of the traffic generator
	// Once runs the scripted check instead of the live view (see once.go).
	Once bool
	Out  io.Writer
	// Terminal says Out is a terminal: the view is redrawn in place, in colour, and keys act.
	Terminal bool
	// Keys, when set (a terminal's input), delivers keypresses until its context ends.
	Keys func(ctx context.Context) <-chan byte
	// Size, when set, gives the terminal's width and height: the view is cut to fit.
	Size func() (width, height int)
	// Interval is how often the view is refreshed; Summary how often a summary is printed
	// when Out is not a terminal.
	Interval, Summary time.Duration
	// StartTimeout bounds each phase of the start.
	StartTimeout time.Duration
	Log          *zap.Logger // the demo's own log (its children log into CacheDir/logs)
}

// DefaultConfig returns the demo's defaults for the example directory dir.
func DefaultConfig(dir string) Config {
	return Config{Dir: dir, CacheDir: filepath.Join(".cache", "demo"), Replicas: 3, Rate: 5, Out: os.Stdout,
		Interval: time.Second, Summary: 5 * time.Second, StartTimeout: 30 * time.Second}
}

// mesh is one run of the demo.
type mesh struct {
	cfg     Config
	log     *zap.Logger
	addrs   Addrs
	dir     string // the directory the control plane reads: cfg.Dir or a working copy
	workDir string // the working copy's parent ("" when following cfg.Dir)
	secrets *Secrets
	sup     *Supervisor
	cluster *ClusterDir
	fwd     *Forwarder
	tls     *cptls.Identity // the demo's own mesh certificate, for its Destination client
	pool    *discovery.Pool
	res     *discovery.Resolver
	watch   *serviceWatch

	pods    []PodPlan
	notes   []string
	started time.Time

	mu      sync.Mutex
	history []*Scrape
	events  []Event
	owners  map[string]string // service -> owner, as last shown
	members int               // ring members, as last shown
	denied  bool              // the demo applied the deny policy
}

// historyLen bounds the scrapes kept (the window of rates and latencies is within it).
const historyLen = 30

// Run runs the demo until ctx ends (or, with Once, until the script is done). It stops every
// process it started before it returns.
func Run(ctx context.Context, cfg Config) error {
	m, err := newMesh(cfg)
	if err != nil {
		return err
	}
	defer m.cleanup()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var g run.Group
	g.StopTimeout = 5 * time.Second
	g.Add("examples", m.cluster)
	g.Add("linkerd-dst", m.fwd)
	g.Add("certificate", m.tls)
	g.Add("discovery", m.res)
	g.Go("demo", func(ctx context.Context) error {
		defer cancel()
		defer m.sup.Close()
		defer m.watch.close()
		return m.main(ctx)
	})
	err = g.Run(ctx)
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

func newMesh(cfg Config) (*mesh, error) {
	if cfg.Binary == "" {
		return nil, errors.New("demo: no meridian binary to run")
	}
	if cfg.Replicas < 1 || cfg.Replicas > 9 {
		return nil, fmt.Errorf("demo: %d replicas: want 1 to 9", cfg.Replicas)
	}
	if st, err := os.Stat(cfg.Dir); err != nil || !st.IsDir() {
		return nil, fmt.Errorf("demo: the example cluster %s is not a directory", cfg.Dir)
	}
	log := cfg.Log
	if log == nil {
		log = zap.NewNop()
	}
	m := &mesh{cfg: cfg, log: log, addrs: Addrs{Net: cfg.Net}, dir: cfg.Dir, owners: map[string]string{}}
	ok := false
	defer func() {
		if !ok {
			m.cleanup()
		}
	}()
	if err := os.MkdirAll(cfg.CacheDir, 0o755); err != nil {
		return nil, err
	}
	if cfg.Once || cfg.Net != 0 {
		// A working copy: --once changes it (the deny policy), --net rewrites its addresses.
		var err error
		if m.workDir, err = os.MkdirTemp(cfg.CacheDir, "run-"); err != nil {
			return nil, err
		}
		m.dir = filepath.Join(m.workDir, "examples")
		if err := copyExamples(cfg.Dir, m.dir, cfg.Net); err != nil {
			return nil, err
		}
	}
	var err error
	if m.secrets, err = PrepareSecrets(cfg.CacheDir, time.Now()); err != nil {
		return nil, err
	}
	logDir := filepath.Join(cfg.CacheDir, "logs")
	_ = os.RemoveAll(logDir) // this run's logs only
	if m.sup, err = NewSupervisor(cfg.Binary, logDir, log.Named("processes")); err != nil {
		return nil, err
	}
	m.cluster = NewClusterDir(m.dir, log.Named("examples"))
	if m.fwd, err = NewForwarder(m.addrs.DstService(), m.liveReplicas, log.Named("linkerd-dst")); err != nil {
		return nil, fmt.Errorf("linkerd-dst %s: %w (is another demo running? try --net)", m.addrs.DstService(), err)
	}
	// The demo follows the services through the Destination API as a proxy does: mTLS, with a
	// certificate of its own ServiceAccount from identity (renewed), verifying the replicas.
	tcfg := cptls.DefaultConfig()
	idAddr, _ := m.addrs.Identity()
	tcfg.Name, tcfg.IdentityAddr, tcfg.IdentityName = Identity(ControlPlaneNamespace, DemoSA), idAddr, Identity(ControlPlaneNamespace, IdentitySA)
	tcfg.TrustAnchorsFile, tcfg.TokenFile = m.secrets.TrustAnchorsFile(), m.secrets.DemoToken
	// identity starts with the control plane, after this client: retry soon.
	tcfg.Client.InitialBackoff, tcfg.Client.MaxBackoff = 100*time.Millisecond, time.Second
	if m.tls, err = cptls.New(tcfg, log.Named("tls")); err != nil {
		return nil, err
	}
	m.pool = discovery.NewPool(grpc.WithTransportCredentials(m.tls.ClientCredentials(Identity(ControlPlaneNamespace, DestinationSA))))
	dcfg := discovery.DefaultConfig()
	dcfg.Addr = m.addrs.DstService()
	dcfg.IdleTimeout = time.Minute
	m.res = discovery.NewResolver(dcfg, m.pool, log.Named("discovery"))
	m.watch = newServiceWatch(m.res)
	ok = true
	return m, nil
}

// cleanup removes what the run made and the demo does not keep.
func (m *mesh) cleanup() {
	if m.pool != nil {
		_ = m.pool.Close()
	}
	if m.tls != nil {
		m.tls.Close()
	}
	if m.sup != nil {
		m.sup.Close()
	}
	if m.denied && m.workDir == "" {
		_ = os.Remove(m.denyPath())
	}
	if m.workDir != "" {
		_ = os.RemoveAll(m.workDir)
	}
}

// liveReplicas are the gRPC addresses of the replicas that run.
func (m *mesh) liveReplicas() []string {
	var out []string
	for i := range m.cfg.Replicas {
		if p := m.sup.Proc(ReplicaName(i)); p != nil && p.Alive() {
			grpc, _, _ := m.addrs.Replica(i)
			out = append(out, grpc)
		}
	}
	return out
}

func (m *mesh) say(format string, args ...any) { fmt.Fprintf(m.cfg.Out, format+"\n", args...) }

// main starts everything, then shows it (or runs the script) until ctx ends.
func (m *mesh) main(ctx context.Context) error {
	if err := m.start(ctx); err != nil {
		return err
	}
	if m.cfg.Once {
		return m.once(ctx)
	}
	return m.live(ctx)
}

// start brings the mesh up phase by phase, each bounded by StartTimeout.
func (m *mesh) start(ctx context.Context) error {
	t0 := time.Now()
	select {
	case <-m.cluster.First():
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(m.cfg.StartTimeout):
		return fmt.Errorf("the example cluster %s was not read within %s", m.dir, m.cfg.StartTimeout)
	}
	for _, w := range m.cluster.Warnings() {
		m.say("warning: %s", w)
	}
	m.pods, m.notes = PlanPods(m.cluster.Current())
	m.say("Meridian local mesh on %s (logs in %s)", m.dir, filepath.Join(m.cfg.CacheDir, "logs"))
	if m.secrets.Created {
		m.say("  generated a trust anchor and issuer into %s (reused by later runs)", m.secrets.IdentityDir)
	}
	if err := m.startPhase(ctx, "control plane (identity, policy, "+fmt.Sprint(m.cfg.Replicas)+" destination replicas)",
		ControlPlane(m.addrs, m.cfg.Replicas, m.dir, m.secrets)); err != nil {
		return err
	}
	var specs []Spec
	for _, p := range m.pods {
		if p.Traffic == nil {
			specs = append(specs, p.AppSpec())
		}
		if p.Meshed {
			tok, err := m.secrets.Token(p.Namespace, p.ServiceAccount, time.Now())
			if err != nil {
				return err
			}
			specs = append(specs, p.ProxySpec(m.addrs, m.secrets.TrustAnchors, tok))
		}
	}
	if err := m.startPhase(ctx, fmt.Sprintf("%d pods: applications and proxies", len(m.pods)), specs); err != nil {
		return err
	}
	specs = nil
	for _, p := range m.pods {
		if p.Traffic != nil {
			specs = append(specs, p.TrafficSpec(m.cfg.Rate))
		}
	}
	if err := m.startPhase(ctx, "traffic", specs); err != nil {
		return err
	}
	for _, n := range m.notes {
		m.say("  (%s)", n)
	}
	m.started = time.Now()
	m.say("up in %s: %d processes", m.started.Sub(t0).Round(10*time.Millisecond), len(m.sup.Procs()))
	return nil
}

// startPhase starts specs at once and waits until every one is ready.
func (m *mesh) startPhase(ctx context.Context, what string, specs []Spec) error {
	t0 := time.Now()
	var procs []*Proc
	for _, s := range specs {
		p, err := m.sup.Start(s)
		if err != nil {
			return err
		}
		procs = append(procs, p)
	}
	errs := make([]error, len(procs))
	var wg sync.WaitGroup
	for i, p := range procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = p.WaitReady(ctx, m.cfg.StartTimeout)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	m.say("  %-60s ready in %s", what, time.Since(t0).Round(10*time.Millisecond))
	return nil
}

// scrapeTargets are what a round reads: the live replicas' /ring and the live proxies',
// applications' and generators' /metrics.
func (m *mesh) scrapeTargets() []scrapeTarget {
	var out []scrapeTarget
	for i := range m.cfg.Replicas {
		_, admin, _ := m.addrs.Replica(i)
		out = append(out, scrapeTarget{name: ReplicaName(i), url: "http://" + admin + "/ring", ring: true})
	}
	for _, p := range m.pods {
		if p.Traffic != nil {
			out = append(out, scrapeTarget{name: "traffic/" + p.Name, url: "http://" + p.MetricsAddr() + "/metrics"})
		} else {
			out = append(out, scrapeTarget{name: "app/" + p.Name, url: "http://" + p.MetricsAddr() + "/metrics"})
		}
		if p.Meshed {
			out = append(out, scrapeTarget{name: "proxy/" + p.Name, url: "http://" + p.ProxyAdminAddr() + "/metrics"})
		}
	}
	var live []scrapeTarget
	for _, t := range out {
		if p := m.sup.Proc(t.name); p != nil && p.Alive() {
			live = append(live, t)
		}
	}
	return live
}

// refresh takes a round, records what changed as events and returns the model.
func (m *mesh) refresh(ctx context.Context) Model {
	s := scrape(ctx, m.scrapeTargets(), time.Now)
	services := m.watch.states(ctx, m.cluster.Current(), s.At)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.history = append(m.history, s)
	if len(m.history) > historyLen {
		m.history = m.history[len(m.history)-historyLen:]
	}
	in := Inputs{Now: s.At, Started: m.started, Pods: m.pods, Services: services, History: m.history, Events: m.events, Window: 10 * time.Second}
	for i := range m.cfg.Replicas {
		grpc, _, _ := m.addrs.Replica(i)
		in.Replicas, in.ReplicaAddrs = append(in.Replicas, ReplicaName(i)), append(in.ReplicaAddrs, grpc)
	}
	for _, p := range m.sup.Procs() {
		in.Procs = append(in.Procs, ProcState{Name: p.Name(), Role: p.Role(), Pid: p.Pid(), Alive: p.Alive(), Starts: p.Starts()})
	}
	model := BuildModel(in)
	m.noteChanges(model)
	model.Events = m.events
	return model
}

// noteChanges records ring membership and ownership changes as events; the caller holds m.mu.
func (m *mesh) noteChanges(model Model) {
	if model.Ring.SeenBy == "" || !model.Ring.Agreed {
		return
	}
	if m.members != 0 && model.Ring.Members != m.members {
		var names []string
		for _, r := range model.Ring.Rows {
			if r.InRing {
				names = append(names, r.Name)
			}
		}
		m.eventLocked(fmt.Sprintf("ring: %d members (%s)", model.Ring.Members, strings.Join(names, ", ")))
	}
	m.members = model.Ring.Members
	var moved []string
	for _, s := range model.Services {
		if s.Owner == "?" {
			continue
		}
		if old, ok := m.owners[s.Service]; ok && old != s.Owner {
			moved = append(moved, fmt.Sprintf("%s %s->%s", s.Service, old, s.Owner))
		}
		m.owners[s.Service] = s.Owner
	}
	if len(moved) > 0 {
		m.eventLocked("ownership moved: " + strings.Join(uniq(moved), ", "))
	}
}

func uniq(ss []string) []string {
	var out []string
	for _, s := range ss {
		if len(out) == 0 || out[len(out)-1] != s {
			out = append(out, s)
		}
	}
	return out
}

// maxEvents bounds the events kept.
const maxEvents = 50

func (m *mesh) event(text string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.eventLocked(text)
}

func (m *mesh) eventLocked(text string) {
	m.events = append(m.events, Event{At: time.Since(m.started), Text: text})
	if len(m.events) > maxEvents {
		m.events = m.events[len(m.events)-maxEvents:]
	}
	m.log.Info("event", zap.String("event", text))
}
