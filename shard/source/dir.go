package source

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
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/fsnotify/fsnotify"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
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
	// inotify limits). Zero or negative disables it.
	Rescan time.Duration
	// MaxFileSize bounds the size of a file that is read; a larger one is reported as an
	// error (and what it last held is kept).
	MaxFileSize int64
}

// DefaultDirConfig returns the configuration NewDir uses for path.
func DefaultDirConfig(path string) DirConfig {
	return DirConfig{
		Path:        path,
		Debounce:    100 * time.Millisecond,
		Rescan:      2 * time.Second,
		MaxFileSize: 16 << 20,
	}
}

// Dir is a Source that reads Kubernetes YAML or JSON (*.yaml, *.yml, *.json; multi-document
// files; kinds Service, EndpointSlice of discovery.k8s.io/v1, Pod, and List/ServiceList/
// PodList/EndpointSliceList of them; other kinds are ignored) from a directory and follows
// its changes.
//
// Every scan reads all files, and delivers to the handler only the difference from what it
// delivered before, by object (kind, namespace, name): new and changed objects (by a hash
// of their decoded content, so a rescan without change delivers nothing), and deleted=true
// for objects that left their file or whose file is gone. Upserts are delivered Pods first,
// then Services, then EndpointSlices (so that a slice's pods are known when it arrives);
// deletes in the reverse order.
//
// A file that does not decode or validate is reported (Errors, and a logged error with
// file:line: reason) and does not disturb anything: the objects of its last good version
// stay, as they were, until it parses again. An object defined in two files is taken from
// the first file in lexical path order, and the other definition is reported.
//
// Write files atomically (write elsewhere, then rename into place, as kubectl-style tools
// and most editors do): a scan that catches a file half-written in place sees whatever
// that half holds until the next scan.
//
// Handler calls come from the goroutine running Run, or from Replay, never two at a time.
type Dir struct {
	cfg DirConfig
	log *zap.Logger

	synced atomic.Bool
	errs   atomic.Pointer[[]error]
	// afterScan, when set (by tests, before Run), is called after each scan has delivered.
	afterScan func()

	// Owned by the goroutine running Run.
	files map[string]*fileState
	// deliverMu serialises handler calls (a scan's, Replay's), so that Replay never delivers
	// an object after a newer version or its deletion.
	deliverMu sync.Mutex
	// delivered and handler are written under deliverMu and mu; Pod reads them under mu.
	mu        sync.RWMutex
	delivered map[objectKey]object
	handler   Handler // the handler of the running Run; nil when Run is not running
	watched   map[string]bool
	running   sync.Mutex
}

var _ Source = (*Dir)(nil)

// fileState is what is known of one file: the hash of the content last read, the objects of
// its last version that decoded without error, and the errors of its current content.
type fileState struct {
	hash uint64
	read bool // hash is valid
	good []object
	errs []error
}

// NewDir returns a Dir source for path with DefaultDirConfig.
func NewDir(path string, log *zap.Logger) *Dir {
	return NewDirWithConfig(DefaultDirConfig(path), log)
}

// NewDirWithConfig returns a Dir source with an explicit configuration.
func NewDirWithConfig(cfg DirConfig, log *zap.Logger) *Dir {
	if log == nil {
		log = zap.NewNop()
	}
	if cfg.MaxFileSize <= 0 {
		cfg.MaxFileSize = DefaultDirConfig("").MaxFileSize
	}
	return &Dir{
		cfg:       cfg,
		log:       log.With(zap.String("source", "dir"), zap.String("path", cfg.Path)),
		files:     map[string]*fileState{},
		delivered: map[objectKey]object{},
		watched:   map[string]bool{},
	}
}

// Synced reports whether the first full scan has been delivered.
func (d *Dir) Synced() bool { return d.synced.Load() }

// Errors returns the problems found by the latest scan, sorted by file and line: files
// that do not decode or validate (each a *FileError), objects defined twice, unreadable
// files. Nil when the directory is clean. The returned slice must not be modified.
func (d *Dir) Errors() []error {
	if p := d.errs.Load(); p != nil {
		return *p
	}
	return nil
}

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
		d.mu.Lock()
		d.handler = nil
		d.mu.Unlock()
		d.deliverMu.Unlock()
	}()

	if fi, err := os.Stat(d.cfg.Path); err != nil {
		return fmt.Errorf("dir source: %w", err)
	} else if !fi.IsDir() {
		return fmt.Errorf("dir source: %s is not a directory", d.cfg.Path)
	}

	w, err := fsnotify.NewWatcher()
	if err != nil {
		d.log.Warn("cannot watch the directory for changes; relying on the periodic rescan",
			zap.Error(err), zap.Duration("rescan", d.cfg.Rescan))
		w = nil
	} else {
		defer w.Close()
	}
	if err := d.scan(h, w); err != nil {
		return fmt.Errorf("dir source: %w", err)
	}
	d.synced.Store(true)
	d.log.Info("directory loaded", zap.Int("objects", len(d.delivered)), zap.Int("errors", len(d.Errors())))

	var events <-chan fsnotify.Event
	var watchErrs <-chan error
	if w != nil {
		events, watchErrs = w.Events, w.Errors
	}
	var tick <-chan time.Time
	if d.cfg.Rescan > 0 {
		t := time.NewTicker(d.cfg.Rescan)
		defer t.Stop()
		tick = t.C
	}
	debounce := time.NewTimer(time.Hour)
	debounce.Stop()
	defer debounce.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			if relevantEvent(ev) {
				if ev.Op&(fsnotify.Remove|fsnotify.Rename) != 0 && d.watched[ev.Name] {
					// The kernel dropped the watch with the directory; a directory created
					// again under the same name must be watched anew.
					delete(d.watched, ev.Name)
				}
				debounce.Reset(d.cfg.Debounce)
			}
		case err, ok := <-watchErrs:
			if !ok {
				watchErrs = nil
				continue
			}
			d.log.Warn("directory watch error; the periodic rescan still runs", zap.Error(err))
		case <-debounce.C:
			d.rescan(h, w)
		case <-tick:
			d.rescan(h, w)
		}
	}
}

func (d *Dir) rescan(h Handler, w *fsnotify.Watcher) {
	if err := d.scan(h, w); err != nil {
		d.log.Error("cannot read the directory; keeping what was loaded", zap.Error(err))
	}
}

// relevantEvent reports whether an event may change what the directory holds. Chmod
// alone does not (editors and backup tools touch modes), except that it is all some
// file systems report; the periodic rescan covers those.
func relevantEvent(ev fsnotify.Event) bool {
	return ev.Op&(fsnotify.Create|fsnotify.Write|fsnotify.Remove|fsnotify.Rename) != 0
}

// manifestFile reports whether a file name is one the source reads.
func manifestFile(name string) bool {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

// scan reads the directory and delivers the difference. It fails only when the directory
// itself cannot be listed, and then changes nothing.
func (d *Dir) scan(h Handler, w *fsnotify.Watcher) error {
	paths, dirs, walkErrs, err := d.list()
	if err != nil {
		return err
	}
	if w != nil {
		d.watch(w, dirs)
	}
	seen := make(map[string]bool, len(paths))
	for _, p := range paths {
		seen[p] = true
		d.readFile(p)
	}
	for p, st := range d.files {
		if !seen[p] {
			delete(d.files, p)
			if len(st.good) > 0 {
				d.log.Info("file removed", zap.String("file", p), zap.Int("objects", len(st.good)))
			}
		}
	}

	// Merge files in path order; the first definition of an object wins.
	var errs []error
	errs = append(errs, walkErrs...)
	want := map[objectKey]object{}
	where := map[objectKey]string{}
	for _, p := range paths {
		st := d.files[p]
		if st == nil {
			continue
		}
		errs = append(errs, st.errs...)
		for _, o := range st.good {
			if first, dup := where[o.key]; dup {
				errs = append(errs, &FileError{File: p, Line: o.line,
					Err: fmt.Errorf("%s is already defined in %s; this definition is ignored", o.key, first)})
				continue
			}
			want[o.key] = o
			where[o.key] = fmt.Sprintf("%s:%d", p, o.line)
		}
	}
	sortErrors(errs)
	if len(errs) == 0 {
		d.errs.Store(nil)
	} else {
		d.errs.Store(&errs)
	}

	d.deliver(h, want)
	if d.afterScan != nil {
		d.afterScan()
	}
	return nil
}

// list walks the directory for manifest files (sorted) and directories to watch.
func (d *Dir) list() (files, dirs []string, errs []error, err error) {
	root := d.cfg.Path
	err = filepath.WalkDir(root, func(p string, e fs.DirEntry, werr error) error {
		if werr != nil {
			if p == root {
				return werr
			}
			errs = append(errs, &FileError{File: p, Err: werr})
			return nil
		}
		name := e.Name()
		if p != root && strings.HasPrefix(name, ".") {
			if e.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		switch {
		case e.IsDir():
			dirs = append(dirs, p)
		case e.Type().IsRegular() && manifestFile(name):
			files = append(files, p)
		case e.Type()&fs.ModeSymlink != 0 && manifestFile(name):
			// Follow symlinks to files (a ConfigMap mount), not to directories (no loops).
			if fi, serr := os.Stat(p); serr == nil && fi.Mode().IsRegular() {
				files = append(files, p)
			}
		}
		return nil
	})
	if err != nil {
		return nil, nil, nil, err
	}
	sort.Strings(files)
	return files, dirs, errs, nil
}

// watch makes the watcher cover exactly the directories found.
func (d *Dir) watch(w *fsnotify.Watcher, dirs []string) {
	now := make(map[string]bool, len(dirs))
	for _, dir := range dirs {
		now[dir] = true
		if d.watched[dir] {
			continue
		}
		if err := w.Add(dir); err != nil {
			d.log.Warn("cannot watch directory; the periodic rescan still covers it", zap.String("dir", dir), zap.Error(err))
			continue
		}
		d.watched[dir] = true
	}
	for dir := range d.watched {
		if !now[dir] {
			_ = w.Remove(dir) // it is usually gone already, and its watch with it
			delete(d.watched, dir)
		}
	}
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
		fe := &FileError{File: p, Err: err}
		if len(st.errs) != 1 || st.errs[0].Error() != fe.Error() { // log once, not every rescan
			d.log.Error("cannot read file; keeping what it held before", zap.String("file", p), zap.Error(err))
		}
		st.read = false
		st.errs = []error{fe}
		return
	}
	sum := xxhash.Sum64(data)
	if st.read && st.hash == sum {
		return
	}
	st.hash, st.read = sum, true
	dec := decodeFile(p, data)
	for _, ig := range dec.ignored {
		d.log.Debug("ignoring object of a kind this source does not deliver",
			zap.String("at", fmt.Sprintf("%s:%d", p, ig.line)), zap.String("apiVersion", ig.apiVersion), zap.String("kind", ig.kind))
	}
	if len(dec.errs) > 0 {
		st.errs = dec.errs
		for _, e := range dec.errs {
			d.log.Error("malformed manifest; keeping the file's previous objects", zap.String("error", e.Error()),
				zap.Int("kept", len(st.good)))
		}
		return
	}
	st.errs = nil
	st.good = dec.objects
	d.log.Debug("file loaded", zap.String("file", p), zap.Int("objects", len(dec.objects)))
}

func readLimited(p string, max int64) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("file is larger than the %d bytes allowed", max)
	}
	return data, nil
}

// kindOrder is the order upserts are delivered in; deletes go in reverse.
var kindOrder = map[string]int{KindPod: 0, KindService: 1, KindEndpointSlice: 2}

// deliver sends the difference between what was delivered and want.
func (d *Dir) deliver(h Handler, want map[objectKey]object) {
	var upserts, deletes []object
	for k, o := range want {
		if old, ok := d.delivered[k]; !ok || old.hash != o.hash {
			upserts = append(upserts, o)
		}
	}
	for k, o := range d.delivered {
		if _, ok := want[k]; !ok {
			deletes = append(deletes, o)
		}
	}
	sortObjects(upserts, false)
	sortObjects(deletes, true)
	d.deliverMu.Lock()
	defer d.deliverMu.Unlock()
	// Publish the new state before the calls, so that a handler looking up a pod (Pod) while
	// handling a slice delivered below finds it.
	d.mu.Lock()
	d.delivered = want
	d.handler = h
	d.mu.Unlock()
	for _, o := range upserts {
		call(h, o, false)
	}
	for _, o := range deletes {
		call(h, o, true)
	}
	if len(upserts)+len(deletes) > 0 {
		d.log.Debug("delivered changes", zap.Int("upserts", len(upserts)), zap.Int("deletes", len(deletes)))
	}
}

// Pod implements Source: the pod as last delivered.
func (d *Dir) Pod(ns, name string) *corev1.Pod {
	d.mu.RLock()
	defer d.mu.RUnlock()
	if o, ok := d.delivered[objectKey{kind: KindPod, namespace: ns, name: name}]; ok {
		p, _ := o.obj.(*corev1.Pod)
		return p
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
	objs := make([]object, 0, len(d.delivered))
	for _, o := range d.delivered {
		objs = append(objs, o)
	}
	sortObjects(objs, false)
	for _, o := range objs {
		if err := ctx.Err(); err != nil {
			return err
		}
		call(h, o, false)
	}
	return nil
}

func sortObjects(objs []object, reverse bool) {
	sort.Slice(objs, func(i, j int) bool {
		a, b := objs[i].key, objs[j].key
		if a.kind != b.kind {
			if reverse {
				return kindOrder[a.kind] > kindOrder[b.kind]
			}
			return kindOrder[a.kind] < kindOrder[b.kind]
		}
		if a.namespace != b.namespace {
			return a.namespace < b.namespace
		}
		return a.name < b.name
	})
}

func call(h Handler, o object, deleted bool) {
	switch v := o.obj.(type) {
	case *corev1.Service:
		h.OnService(v, deleted)
	case *discoveryv1.EndpointSlice:
		h.OnEndpointSlice(v, deleted)
	case *corev1.Pod:
		h.OnPod(v, deleted)
	}
}

func sortErrors(errs []error) {
	sort.SliceStable(errs, func(i, j int) bool {
		var a, b *FileError
		if !errors.As(errs[i], &a) || !errors.As(errs[j], &b) {
			return false
		}
		if a.File != b.File {
			return a.File < b.File
		}
		return a.Line < b.Line
	})
}
