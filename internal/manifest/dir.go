package manifest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/meridian-mesh/meridian/internal/filewatch"
	"github.com/meridian-mesh/meridian/internal/run"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// Config configures a Dir.
type Config struct {
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
	// error (and what it last held is kept). Zero or negative means the default.
	MaxFileSize int64
	// Order is the order of kinds in which upserts are delivered (deletes go in reverse), so
	// that, say, a slice's pods are known when it arrives. Kinds not listed come after, by name.
	Order []string
}

// DefaultMaxFileSize is the default Config.MaxFileSize: 16 MiB.
const DefaultMaxFileSize = 16 << 20

// DefaultConfig returns the configuration for path: a 100 ms debounce, a 2 s rescan, a
// 16 MiB size cap.
func DefaultConfig(path string) Config {
	return Config{Path: path, Debounce: 100 * time.Millisecond, Rescan: 2 * time.Second, MaxFileSize: DefaultMaxFileSize}
}

// Update is what a scan delivers: the full state and its difference from the state
// delivered before. Values are shared with the Dir and must not be modified.
type Update struct {
	// All is every object now held, by key.
	All map[Key]Object
	// Upserts are the new and changed objects (by content hash), in Config.Order; Deletes
	// the objects gone (as last delivered), in the reverse order.
	Upserts, Deletes []Object
	// Initial marks the first delivery of a Run: Upserts are then every object.
	Initial bool
}

// Dir follows a directory of Kubernetes YAML or JSON files (*.yaml, *.yml, *.json) and
// delivers the objects of the kinds its Decoder knows.
//
// Every scan reads every file whose content changed (by hash) and merges the files in
// lexical path order: the first definition of an object (kind, namespace, name) wins and a
// later one is reported. A file with any problem (it does not decode or validate, is larger
// than the cap, cannot be read, is a broken symbolic link or a loop) keeps every object of
// its last good version until it is good again; a directory that cannot be read keeps what
// was loaded from it. Symbolic links to files are followed (a ConfigMap mount is made of
// them); links to directories are not, and are reported. A value a kind's Decode ignores
// (Decoded.Warnings) is reported as a problem is, but withholds nothing: the object is
// served without it.
//
// Problems are reported the same way for every user: logged at warn once when they appear
// and at info when they clear, counted per file in the gauge manifest_errors{file}, and
// listed by Errors and Warnings (run.Warner). A Dir is ready (run.Readier) once its first
// scan is delivered; problems do not make it unready, since it serves the last good state.
//
// Write files atomically (write elsewhere, then rename into place, as kubectl-style tools
// and most editors do): a scan that catches a file half-written in place sees an error in
// it, or whatever that half holds, until the next scan.
type Dir struct {
	cfg    Config
	dec    *Decoder
	log    *zap.Logger
	report *reporter

	synced  atomic.Bool
	scans   atomic.Int64
	running sync.Mutex

	// Owned by the goroutine running Run.
	files     map[string]*fileState
	delivered map[Key]Object
	initial   bool
}

// fileState is what is known of one file: the hash of the content last read, the objects of
// its last version that decoded without error, and the problems of its current content.
type fileState struct {
	hash uint64
	read bool // hash is valid
	good []Object
	errs []error
	// warns are the values ignored in good (Result.Warnings of the version good is from).
	warns []error
	// wasGood: a version of the file decoded without errors; good is then that version, kept
	// whole while later ones have errors. Before, good is what decoded of the latest one.
	wasGood bool
	// vanished is when a scan first missed the file; its objects stay until a scan at least a
	// debounce later misses it too (a directory being replaced is briefly half-copied).
	vanished time.Time
}

// NewDir returns a Dir for cfg that decodes with dec. manifest_errors is registered on reg
// (nil: not registered; one already registered there by another Dir is shared). log may be
// nil.
func NewDir(cfg Config, dec *Decoder, reg prometheus.Registerer, log *zap.Logger) *Dir {
	if log == nil {
		log = zap.NewNop()
	}
	if cfg.MaxFileSize <= 0 {
		cfg.MaxFileSize = DefaultMaxFileSize
	}
	log = log.With(zap.String("manifests", cfg.Path))
	return &Dir{cfg: cfg, dec: dec, log: log, report: newReporter(cfg.Path, reg, log)}
}

// Synced reports whether the first scan of the running Run has been delivered.
func (d *Dir) Synced() bool { return d.synced.Load() }

// A Dir gates readiness and reports warnings in a run.Group.
var (
	_ run.Readier = (*Dir)(nil)
	_ run.Warner  = (*Dir)(nil)
)

// Ready implements run.Readier: nil once the first scan has been delivered.
func (d *Dir) Ready() error {
	if !d.synced.Load() {
		return fmt.Errorf("manifest directory %s not read yet", d.cfg.Path)
	}
	return nil
}

// Errors returns the problems found by the latest scan, sorted by file and line, each a
// *FileError (those with Warning set are values ignored in objects that are served); nil
// when the directory is clean. The slice must not be modified.
func (d *Dir) Errors() []error { return d.report.errors() }

// Warnings implements run.Warner: one "file:line: reason" line per current problem.
func (d *Dir) Warnings() []string {
	errs := d.Errors()
	if len(errs) == 0 {
		return nil
	}
	out := make([]string, len(errs))
	for i, e := range errs {
		out[i] = e.Error()
	}
	return out
}

// Scans returns how many scans have completed (for tests and diagnostics).
func (d *Dir) Scans() int64 { return d.scans.Load() }

// Run scans the directory, delivers its objects, and then follows changes (file
// notifications, and a rescan every Config.Rescan) until ctx ends; then it returns nil.
// deliver is called on Run's goroutine, never twice at a time: first with the initial
// state (Initial, even when empty), then after every scan that changed something. It should
// not block for long: changes are not read meanwhile. Run returns an error at once when
// the directory cannot be read at the start; later failures are reported and leave what
// was delivered in place. Run must not be called concurrently with itself; each Run starts
// from nothing delivered.
func (d *Dir) Run(ctx context.Context, deliver func(Update)) error {
	if !d.running.TryLock() {
		return errors.New("manifest directory: Run is already running")
	}
	defer d.running.Unlock()
	if fi, err := os.Stat(d.cfg.Path); err != nil {
		return fmt.Errorf("manifest directory: %w", err)
	} else if !fi.IsDir() {
		return fmt.Errorf("manifest directory %s: not a directory", d.cfg.Path)
	}
	d.synced.Store(false)
	d.files, d.delivered, d.initial = map[string]*fileState{}, map[Key]Object{}, true
	w := filewatch.New(filewatch.Config{
		Paths: []string{d.cfg.Path}, Recursive: true, Debounce: d.cfg.Debounce, Poll: d.cfg.Rescan, Initial: true,
	}, d.log)
	return w.Run(ctx, func() {
		if d.scan(deliver) {
			w.Again() // confirm the removals a debounce from now
		}
	})
}

// scan reads the directory, records its problems and delivers the difference. A file that
// is gone keeps its objects until a scan at least a debounce after the first that missed it
// still misses it: `rm -rf d && cp -r src d` caught halfway must not delete (for policy: open)
// what the rest of the copy brings back. scan reports whether a removal awaits confirmation.
func (d *Dir) scan(deliver func(Update)) (pending bool) {
	defer d.scans.Add(1)
	var errs []error
	ls, err := d.list()
	if err != nil {
		errs = append(errs, &FileError{File: d.cfg.Path,
			Err: fmt.Errorf("cannot read the directory; keeping what was loaded from it: %w", err)})
	} else {
		errs = append(errs, ls.errs...)
		seen := make(map[string]bool, len(ls.files))
		for _, p := range ls.files {
			seen[p] = true
			d.readFile(p)
		}
		now := time.Now()
		for p, st := range d.files {
			if seen[p] || ls.under(p) {
				st.vanished = time.Time{}
				continue
			}
			if len(st.good) > 0 && !d.initial {
				if st.vanished.IsZero() {
					st.vanished = now
				}
				if now.Sub(st.vanished) < d.cfg.Debounce {
					pending = true
					continue
				}
				d.log.Info("file removed", zap.String("file", p), zap.Int("objects", len(st.good)))
			}
			delete(d.files, p)
		}
	}
	want, dups := d.merge()
	errs = append(errs, dups...)
	for _, st := range d.files {
		errs = append(errs, st.errs...)
		errs = append(errs, st.warns...)
	}
	SortErrors(errs)
	d.report.update(errs)

	upserts, deletes := diff(d.delivered, want, d.cfg.Order)
	initial := d.initial
	d.delivered, d.initial = want, false
	if initial || len(upserts)+len(deletes) > 0 {
		deliver(Update{All: want, Upserts: upserts, Deletes: deletes, Initial: initial})
	}
	if initial {
		d.synced.Store(true)
		d.log.Info("manifest directory loaded", zap.Int("objects", len(want)), zap.Int("errors", len(errs)))
	} else if len(upserts)+len(deletes) > 0 {
		d.log.Debug("delivered changes", zap.Int("upserts", len(upserts)), zap.Int("deletes", len(deletes)))
	}
	return pending
}

// merge takes every file's good objects in path order; the first definition of an object
// wins, and the others are reported.
func (d *Dir) merge() (map[Key]Object, []error) {
	paths := make([]string, 0, len(d.files))
	for p := range d.files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	want := map[Key]Object{}
	var errs []error
	for _, p := range paths {
		for _, o := range d.files[p].good {
			if first, dup := want[o.Key]; dup {
				errs = append(errs, &FileError{File: p, Line: o.Line,
					Err: fmt.Errorf("%s is already defined in %s:%d; this definition is ignored", o.Key, first.File, first.Line)})
				continue
			}
			want[o.Key] = o
		}
	}
	return want, errs
}

// readFile reads and decodes one file if its content changed since the last read.
func (d *Dir) readFile(p string) {
	st := d.files[p]
	if st == nil {
		st = &fileState{}
		d.files[p] = st
	}
	data, err := readLimited(p, d.cfg.MaxFileSize)
	if err != nil {
		st.read = false
		st.errs = []error{&FileError{File: p, Err: err}}
		return
	}
	sum := xxhash.Sum64(data)
	if st.read && st.hash == sum {
		return
	}
	st.hash, st.read = sum, true
	res := d.dec.Decode(p, data)
	for _, ig := range res.Ignored {
		d.log.Debug("ignoring an object of a kind this directory does not deliver",
			zap.String("at", fmt.Sprintf("%s:%d", p, ig.Line)), zap.String("apiVersion", ig.APIVersion), zap.String("kind", ig.Kind))
	}
	if len(res.Errors) > 0 {
		st.errs = res.Errors
		if !st.wasGood {
			// No good version to keep: the objects that decoded are delivered, as the API
			// server would take each on its own. Withheld, a valid Server in a file with a
			// broken neighbour left its pods on the (wider) default policy.
			st.good, st.warns = FirstOfEach(res.Objects), res.Warnings
		}
		return
	}
	st.errs, st.good, st.warns, st.wasGood = nil, res.Objects, res.Warnings, true
	d.log.Debug("file loaded", zap.String("file", p), zap.Int("objects", len(res.Objects)))
}

// FirstOfEach is objs without the later definitions of an object defined twice (the
// decoder reports them, among a file's errors).
func FirstOfEach(objs []Object) []Object {
	seen := make(map[Key]bool, len(objs))
	out := make([]Object, 0, len(objs))
	for _, o := range objs {
		if !seen[o.Key] {
			seen[o.Key] = true
			out = append(out, o)
		}
	}
	return out
}

// readLimited reads a file of at most max bytes. Its errors say what is wrong without
// repeating the path (a FileError names it).
func readLimited(p string, max int64) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, openError(p, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, fmt.Errorf("cannot read the file; keeping what it held before: %w", unwrapPath(err))
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("file is larger than the %d bytes allowed (%s, the size cap); it is not read, and what it held before is kept",
			max, sizeString(max))
	}
	return data, nil
}

func openError(p string, err error) error {
	if errors.Is(err, syscall.ELOOP) {
		return errors.New("symbolic link loop (too many levels of symbolic links); what the file held before is kept")
	}
	if errors.Is(err, fs.ErrNotExist) {
		if target, lerr := os.Readlink(p); lerr == nil {
			return fmt.Errorf("broken symbolic link: its target %q does not exist; what the file held before is kept", target)
		}
	}
	return fmt.Errorf("cannot open the file; keeping what it held before: %w", unwrapPath(err))
}

func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

func sizeString(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}

// manifestFile reports whether a file name is one a Dir reads.
func manifestFile(name string) bool {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}
