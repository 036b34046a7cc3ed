package filewatch

import (
	"context"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
	"go.uber.org/zap"
)

// Config says what to watch and how often to look regardless.
type Config struct {
	// Paths are files or directories. A directory is watched for changes to its entries (and,
	// through its parent, for being replaced); a file is watched through its directory, so
	// that an atomic rename over it, or a Kubernetes volume's symlink swap, is seen.
	Paths []string
	// Recursive also watches the subdirectories of the directories in Paths. Names starting
	// with "." are skipped (.git, a Kubernetes volume's ..data: its changes show in the top
	// directory as the swap of a symlink).
	Recursive bool
	// Debounce is how long the paths must stay quiet after a notification before changed is
	// called, so that a burst of events is one call.
	Debounce time.Duration
	// Poll is the period at which changed is called whatever the notifications say: the safety
	// net for file systems without notifications, for lost events and for directories that
	// were replaced. Zero or negative disables it.
	Poll time.Duration
	// Initial calls changed once as soon as the watches are first in place, before Run waits
	// for anything: a caller that loads what the paths hold in that call misses no change made
	// after it began (one made before is in what it reads).
	Initial bool
}

// Default returns a Config for paths with a 100 ms debounce and a 2 s poll.
func Default(paths ...string) Config {
	return Config{Paths: paths, Debounce: 100 * time.Millisecond, Poll: 2 * time.Second}
}

// Watcher follows the paths of a Config.
type Watcher struct {
	cfg Config
	log *zap.Logger

	// Owned by the goroutine running Run.
	fw      *fsnotify.Watcher
	watched map[string]os.FileInfo // directory -> what it was when its watch was added
	parents map[string]bool        // parents watched for their child path to reappear
	roots   map[string]bool        // the directories of Paths, cleaned
	failing map[string]string      // path -> the problem last logged for it

	again chan struct{} // one slot: Again asks for another call after a debounce
}

// New returns a Watcher for cfg. log may be nil.
func New(cfg Config, log *zap.Logger) *Watcher {
	if log == nil {
		log = zap.NewNop()
	}
	if cfg.Debounce <= 0 {
		cfg.Debounce = Default().Debounce
	}
	return &Watcher{cfg: cfg, log: log, watched: map[string]os.FileInfo{}, parents: map[string]bool{}, failing: map[string]string{},
		again: make(chan struct{}, 1)}
}

// Again asks Run to call changed once more, a debounce period from now, whatever the files do
// meanwhile (a caller that wants to see a state twice before acting on it). It never blocks
// and may be called from changed itself; requests made before that call runs coalesce.
func (w *Watcher) Again() {
	select {
	case w.again <- struct{}{}:
	default:
	}
}

// Run calls changed after every debounced burst of notifications and at every poll, until ctx
// ends; then it returns nil. changed runs on Run's goroutine, never twice at a time, and the
// next notification is not lost while it runs (it is collected and debounced anew). Run never
// fails: see the package comment. It must not be called twice at a time.
func (w *Watcher) Run(ctx context.Context, changed func()) error {
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		w.problem("fsnotify", "cannot watch files for changes; polling every "+w.cfg.Poll.String()+": "+err.Error())
	} else {
		w.fw = fw
		defer func() { _ = fw.Close(); w.fw = nil; clear(w.watched); clear(w.parents) }()
	}
	w.sync()
	if w.cfg.Initial {
		changed()
	}

	var events <-chan fsnotify.Event
	var errs <-chan error
	if w.fw != nil {
		events, errs = w.fw.Events, w.fw.Errors
	}
	var tick <-chan time.Time
	if w.cfg.Poll > 0 {
		t := time.NewTicker(w.cfg.Poll)
		defer t.Stop()
		tick = t.C
	}
	debounce := time.NewTimer(time.Hour)
	debounce.Stop()
	defer debounce.Stop()
	// A burst that never pauses is cut after maxWait: changed runs at least that often while
	// notifications keep coming.
	maxWait := 10 * w.cfg.Debounce
	var pendingSince time.Time
	kick := func() {
		now := time.Now()
		if pendingSince.IsZero() {
			pendingSince = now
		}
		debounce.Reset(min(w.cfg.Debounce, max(maxWait-now.Sub(pendingSince), 0)))
	}
	fire := func() {
		pendingSince = time.Time{}
		w.sync()
		changed()
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			if w.relevant(ev) {
				kick()
			}
		case err, ok := <-errs:
			if !ok {
				errs = nil
				continue
			}
			// An overflowed queue loses events: look again soon rather than wait for the poll.
			w.problem("fsnotify", "file notifications failed; looking again: "+err.Error())
			kick()
		case <-w.again:
			kick()
		case <-debounce.C:
			fire()
		case <-tick:
			debounce.Stop()
			fire()
		}
	}
}

// relevant reports whether an event may change what the paths hold, and forgets the watch of a
// directory that went away so that sync adds it again when it is back.
func (w *Watcher) relevant(ev fsnotify.Event) bool {
	if ev.Op&(fsnotify.Create|fsnotify.Write|fsnotify.Remove|fsnotify.Rename) == 0 {
		return false // chmod alone: editors and backup tools touch modes
	}
	name := filepath.Clean(ev.Name)
	if ev.Op&(fsnotify.Remove|fsnotify.Rename) != 0 {
		if _, ok := w.watched[name]; ok {
			_ = w.fw.Remove(name) // usually gone with the directory already
			delete(w.watched, name)
		}
	}
	dir := filepath.Dir(name)
	if _, ok := w.watched[dir]; ok {
		return true
	}
	// An event in a parent watched only for its child: relevant when it names a root.
	return w.parents[dir] && w.roots[name]
}

// sync makes the fsnotify watches cover what the paths are now: every directory (and with
// Recursive its subdirectories), the directory of every file, and the parent of every
// directory. A directory replaced since it was watched (another inode) is watched anew.
func (w *Watcher) sync() {
	want := map[string]bool{}
	parents := map[string]bool{}
	w.roots = map[string]bool{}
	for _, p := range w.cfg.Paths {
		p = filepath.Clean(p)
		fi, err := os.Stat(p)
		if err != nil {
			w.problem(p, "cannot watch "+p+" (looking for it every poll): "+err.Error())
			parents[filepath.Dir(p)] = true
			w.roots[p] = true
			continue
		}
		w.recovered(p)
		if !fi.IsDir() {
			want[filepath.Dir(p)] = true
			continue
		}
		want[p] = true
		w.roots[p] = true
		parents[filepath.Dir(p)] = true
		if w.cfg.Recursive {
			for _, d := range subdirs(p) {
				want[d] = true
			}
		}
	}
	if w.fw == nil {
		return
	}
	for d := range want {
		delete(parents, d) // watched in full anyway
	}
	for _, d := range slices.Sorted(maps.Keys(want)) {
		fi, err := os.Stat(d)
		if err != nil {
			continue // gone since it was listed; the next sync sees
		}
		if old, ok := w.watched[d]; ok {
			if os.SameFile(old, fi) {
				continue
			}
			_ = w.fw.Remove(d)
			delete(w.watched, d)
		}
		if err := w.fw.Add(d); err != nil {
			w.problem("watch "+d, "cannot watch "+d+" for changes (polling it): "+err.Error())
			continue
		}
		w.recovered("watch " + d)
		w.watched[d] = fi
	}
	for d := range w.watched {
		if !want[d] {
			_ = w.fw.Remove(d)
			delete(w.watched, d)
		}
	}
	for d := range parents {
		if !w.parents[d] {
			if err := w.fw.Add(d); err != nil {
				continue // the poll covers it; a parent is only a shortcut
			}
			w.parents[d] = true
		}
	}
	for d := range w.parents {
		if !parents[d] {
			if _, full := w.watched[d]; !full {
				_ = w.fw.Remove(d)
			}
			delete(w.parents, d)
		}
	}
}

// problem logs msg at warn the first time it is reported for key, and not again until key
// recovers or reports another problem.
func (w *Watcher) problem(key, msg string) {
	if w.failing[key] == msg {
		return
	}
	w.failing[key] = msg
	w.log.Warn(msg)
}

func (w *Watcher) recovered(key string) {
	if _, ok := w.failing[key]; ok {
		delete(w.failing, key)
		w.log.Info("watching again", zap.String("path", strings.TrimPrefix(key, "watch ")))
	}
}

// subdirs lists the directories below root, skipping names that start with ".". A root that
// is a symbolic link (git-sync's /git/repo, a Secret volume's ..data) is listed through it:
// WalkDir does not follow a link, not even its root. The paths are under root as given.
func subdirs(root string) []string {
	walk := root
	if fi, err := os.Lstat(root); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		if target, err := filepath.EvalSymlinks(root); err == nil {
			walk = target
		}
	}
	var out []string
	_ = filepath.WalkDir(walk, func(p string, e fs.DirEntry, err error) error {
		if err != nil || !e.IsDir() || p == walk {
			return nil
		}
		if strings.HasPrefix(e.Name(), ".") {
			return fs.SkipDir
		}
		if rel, err := filepath.Rel(walk, p); err == nil {
			out = append(out, filepath.Join(root, rel))
		}
		return nil
	})
	return out
}
