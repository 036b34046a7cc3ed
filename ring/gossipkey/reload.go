package gossipkey

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/meridian-mesh/meridian/internal/filewatch"
)

// Target is what a Reloader installs keys in: ring.Cluster. SetGossipKeys must leave the
// current keys in place when it returns an error; it is called from the Reloader's Run
// goroutine only.
type Target interface {
	SetGossipKeys(primary []byte, accepted ...[]byte) error
}

// Config configures a Reloader.
type Config struct {
	// Files are where the keys are.
	Files Files
	// Poll is how often the files are read again besides file notifications (0: the
	// filewatch default, 2s). A Secret volume's update is a rename of its ..data link,
	// which notifications see; the poll covers file systems without them.
	Poll time.Duration
}

// Deps are what a Reloader works on.
type Deps struct {
	Target     Target
	Logger     *zap.Logger
	Registerer prometheus.Registerer // optional: ring_gossip_key_reload_errors_total
}

// Reloader follows the key files and installs every new set in its Target. Run it once;
// Warnings is safe for concurrent use.
type Reloader struct {
	cfg    Config
	target Target
	log    *zap.Logger
	errors prometheus.Counter

	mu      sync.Mutex
	current Keys   // what the target holds
	problem string // the last refusal, "" once a set loads and installs again
}

// NewReloader returns a Reloader whose target holds current (the keys it was built with,
// from Load).
func NewReloader(cfg Config, current Keys, deps Deps) (*Reloader, error) {
	if deps.Target == nil {
		return nil, fmt.Errorf("gossip key reloader: no target")
	}
	log := deps.Logger
	if log == nil {
		log = zap.NewNop()
	}
	r := &Reloader{cfg: cfg, target: deps.Target, log: log, current: current,
		errors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ring_gossip_key_reload_errors_total",
			Help: "Times the gossip key files changed into a set that was refused (missing primary, bad key, unreadable file); the keys in use stayed.",
		})}
	if deps.Registerer != nil {
		if err := deps.Registerer.Register(r.errors); err != nil {
			return nil, fmt.Errorf("gossip key reloader: register metrics: %w", err)
		}
	}
	return r, nil
}

// Run follows the files until ctx ends, installing each new set (internal/filewatch; it
// never fails). It returns nil when ctx ends.
func (r *Reloader) Run(ctx context.Context) error {
	wc := filewatch.Default(r.cfg.Files.Paths()...)
	if r.cfg.Poll > 0 {
		wc.Poll = r.cfg.Poll
	}
	w := filewatch.New(wc, r.log)
	r.reload() // a change between Load and the watch is caught here
	return w.Run(ctx, r.reload)
}

// Warnings names the refused key set while the files hold one (run.Warner).
func (r *Reloader) Warnings() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.problem == "" {
		return nil
	}
	return []string{r.problem}
}

// reload loads the files and installs them when they differ from the current keys.
func (r *Reloader) reload() {
	ks, err := Load(r.cfg.Files)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err == nil && ks.Equal(r.current) {
		r.recovered()
		return
	}
	if err == nil {
		err = r.target.SetGossipKeys(ks.Primary, ks.Accepted...)
	}
	if err != nil {
		msg := fmt.Sprintf("gossip keys in %s not loaded; keeping the keys in use: %v", r.cfg.Files, err)
		if msg != r.problem {
			r.errors.Inc()
			r.log.Warn(msg)
			r.problem = msg
		}
		return
	}
	r.current = ks
	r.recovered()
	primary, accepted := ks.Fingerprints()
	r.log.Info("gossip keys reloaded", zap.String("files", r.cfg.Files.String()), zap.String("primary", primary), zap.Strings("accepted", accepted))
}

// recovered clears a refusal once the files load again. r.mu is held.
func (r *Reloader) recovered() {
	if r.problem != "" {
		r.problem = ""
		r.log.Info("gossip keys load again", zap.String("files", r.cfg.Files.String()))
	}
}
