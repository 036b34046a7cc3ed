package source

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/meridian-mesh/meridian/internal/manifest"
	"github.com/meridian-mesh/meridian/internal/run"
	"github.com/meridian-mesh/meridian/translator"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// DirConfig configures a Dir source.
type DirConfig struct {
	// Path is the directory to read; files in its subdirectories are read too. Names
	// starting with "." are skipped (editor backups, .git, a ConfigMap mount's ..data
	// directory, whose files are reached through the mount's top-level symlinks).
	Path string
	// Debounce is how long the directory must stay quiet after a change notification before
	// it is rescanned, so that an editor's write-rename-chmod sequence is read once.
	Debounce time.Duration
	// Rescan is the period of a full rescan that runs whatever the notifications say, as a
	// safety net for file systems where they are missing (network mounts, overlay layers,
	// inotify limits) and for a directory replaced or moved away and back. Zero or negative
	// disables it.
	Rescan time.Duration
	// MaxFileSize bounds the size of a file that is read; a larger one is reported as an
	// error (and what it last held is kept).
	MaxFileSize int64
	// Registerer, when set, gets the gauge manifest_errors{file} (shared with other
	// manifest directories of the process).
	Registerer prometheus.Registerer
}

// DefaultDirConfig returns the configuration NewDir uses for path.
func DefaultDirConfig(path string) DirConfig {
	m := manifest.DefaultConfig(path)
	return DirConfig{Path: path, Debounce: m.Debounce, Rescan: m.Rescan, MaxFileSize: m.MaxFileSize}
}

// Dir is a Source that reads Kubernetes YAML or JSON (*.yaml, *.yml, *.json; multi-document
// files; kinds Service, EndpointSlice of discovery.k8s.io/v1, Pod, Node, Server of
// policy.linkerd.io, and Lists of them; other kinds are ignored) from a directory and follows
// its changes, through internal/manifest.
//
// Every scan delivers to the handler only the difference from what it delivered before, by
// object (kind, namespace, name): new and changed objects (by a hash of their content, so a
// rescan without change delivers nothing), and deleted=true for objects that left their
// file or whose file is gone. Upserts are delivered Nodes first, then Servers, Pods,
// Services and EndpointSlices (so that zones, opaque ports and a slice's pods are known when
// it arrives); deletes in the reverse order.
//
// A file that does not decode or validate is reported (Errors, Warnings, manifest_errors,
// and a warn log once with file:line: reason) and does not disturb anything: the objects of
// its last good version stay, as they were, until it parses again. An object defined in two
// files is taken from the first file in lexical path order, and the other definition is
// reported. See manifest.Dir for the rest (size cap, symbolic links, unreadable directories).
//
// Handler calls come from the goroutine running Run, or from Replay, never two at a time.
type Dir struct {
	m   *manifest.Dir
	log *zap.Logger

	running sync.Mutex
	// deliverMu serialises handler calls (a scan's, Replay's), so that Replay never delivers
	// an object after a newer version or its deletion; handler is written under it.
	deliverMu sync.Mutex
	handler   Handler // the handler of the running Run; nil when Run is not running
	// state is every object last delivered; Pod reads it without a lock.
	state atomic.Pointer[map[manifest.Key]manifest.Object]
}

var (
	_ Source      = (*Dir)(nil)
	_ run.Readier = (*Dir)(nil) // gates the process's readiness on the first scan
	_ run.Warner  = (*Dir)(nil) // reports the manifests' problems in /ready
)

// NewDir returns a Dir source for path with DefaultDirConfig.
func NewDir(path string, log *zap.Logger) *Dir {
	return NewDirWithConfig(DefaultDirConfig(path), log)
}

// NewDirWithConfig returns a Dir source with an explicit configuration.
func NewDirWithConfig(cfg DirConfig, log *zap.Logger) *Dir {
	if log == nil {
		log = zap.NewNop()
	}
	log = log.With(zap.String("source", "dir"))
	mc := manifest.Config{Path: cfg.Path, Debounce: cfg.Debounce, Rescan: cfg.Rescan, MaxFileSize: cfg.MaxFileSize, Order: kindOrder}
	return &Dir{m: manifest.NewDir(mc, dirDecoder, cfg.Registerer, log), log: log}
}

// Synced reports whether the first full scan has been delivered.
func (d *Dir) Synced() bool { return d.m.Synced() }

// Ready implements run.Readier: nil once the first scan has been delivered.
func (d *Dir) Ready() error { return d.m.Ready() }

// Errors returns the problems found by the latest scan, sorted by file and line: files
// that do not decode or validate (each a *FileError), objects defined twice, unreadable
// files. Nil when the directory is clean. The returned slice must not be modified.
func (d *Dir) Errors() []error { return d.m.Errors() }

// Warnings implements run.Warner: one "file:line: reason" line per problem of Errors.
func (d *Dir) Warnings() []string { return d.m.Warnings() }

// Run scans the directory, delivers its objects to h, and then follows changes until ctx
// ends. It returns an error at once if the directory cannot be read at the start; later
// read failures are reported and leave what was delivered in place. Run must not be called
// concurrently with itself.
func (d *Dir) Run(ctx context.Context, h Handler) error {
	if !d.running.TryLock() {
		return errors.New("dir source: Run is already running")
	}
	defer d.running.Unlock()
	defer func() {
		d.deliverMu.Lock()
		d.handler = nil
		d.deliverMu.Unlock()
	}()
	if err := d.m.Run(ctx, func(u manifest.Update) { d.deliver(h, u) }); err != nil {
		return fmt.Errorf("dir source: %w", err)
	}
	return nil
}

// deliver sends a scan's difference to h.
func (d *Dir) deliver(h Handler, u manifest.Update) {
	d.deliverMu.Lock()
	defer d.deliverMu.Unlock()
	// Publish the new state before the calls, so that a handler looking up a pod (Pod) while
	// handling a slice delivered below finds it.
	d.state.Store(&u.All)
	d.handler = h
	for _, o := range u.Upserts {
		deliver(h, o.Value, false)
	}
	for _, o := range u.Deletes {
		deliver(h, o.Value, true)
	}
}

// Pod implements Source: the pod as last delivered.
func (d *Dir) Pod(ns, name string) *translator.Pod {
	if m := d.state.Load(); m != nil {
		if o, ok := (*m)[manifest.Key{Kind: KindPod, Namespace: ns, Name: name}]; ok {
			p, _ := o.Value.(*translator.Pod)
			return p
		}
	}
	return nil
}

// Replay implements Source: every delivered object is delivered again, pods first, while
// scans wait. It must not be called from a Handler method.
func (d *Dir) Replay(ctx context.Context) error {
	d.deliverMu.Lock()
	defer d.deliverMu.Unlock()
	h := d.handler
	if h == nil {
		return errors.New("dir source: Replay while Run is not running or before its first scan")
	}
	m := *d.state.Load()
	objs := make([]manifest.Object, 0, len(m))
	for _, o := range m {
		objs = append(objs, o)
	}
	manifest.SortObjects(objs, kindOrder, false)
	for _, o := range objs {
		if err := ctx.Err(); err != nil {
			return err
		}
		deliver(h, o.Value, false)
	}
	return nil
}
