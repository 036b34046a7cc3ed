package policy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/meridian-mesh/meridian/policy/api"
	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// Source delivers Pods and policy resources to a Sink.
type Source interface {
	// Run delivers the current objects and then every change until ctx ends. It returns nil
	// when ctx ends, or an error when the source cannot work at all.
	Run(ctx context.Context, sink Sink) error
	// Synced reports whether the initial state has been delivered. Safe for concurrent use.
	Synced() bool
}

// DirSource reads Kubernetes manifests (*.yaml, *.yml, *.json; several documents per file;
// kind List) from a directory tree and delivers the Pods and policy resources among them,
// re-reading the tree whenever a file in it changes. Other kinds are skipped; objects that
// fail validation are logged and counted and treated as absent. Objects without a namespace
// are put in "default".
type DirSource struct {
	dir     string
	log     *zap.Logger
	metrics *Metrics
	// Debounce is how long a burst of file events is collected before the tree is re-read.
	Debounce time.Duration
	synced   atomic.Bool
}

var _ Source = (*DirSource)(nil)

// NewDirSource returns a source for dir. metrics may be nil.
func NewDirSource(dir string, log *zap.Logger, metrics *Metrics) *DirSource {
	if metrics == nil {
		metrics = NewMetrics(nil)
	}
	return &DirSource{dir: dir, log: log, metrics: metrics, Debounce: 100 * time.Millisecond}
}

// Synced reports whether the directory has been read once.
func (d *DirSource) Synced() bool { return d.synced.Load() }

// Run reads the tree, delivers it with Sink.Reset, and repeats on every change until ctx ends.
func (d *DirSource) Run(ctx context.Context, sink Sink) error {
	if st, err := os.Stat(d.dir); err != nil {
		return fmt.Errorf("manifest directory: %w", err)
	} else if !st.IsDir() {
		return fmt.Errorf("manifest directory %s: not a directory", d.dir)
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watch %s: %w", d.dir, err)
	}
	defer w.Close()
	d.addWatches(w)
	d.load(sink)
	d.synced.Store(true)

	var timer *time.Timer
	var fire <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			if timer != nil {
				timer.Stop()
			}
			return nil
		case ev, ok := <-w.Events:
			if !ok {
				return errors.New("file watcher closed")
			}
			if ev.Has(fsnotify.Create) {
				d.addWatches(w) // a new subdirectory
			}
			if timer == nil {
				timer = time.NewTimer(d.Debounce)
				fire = timer.C
			}
		case err, ok := <-w.Errors:
			if !ok {
				return errors.New("file watcher closed")
			}
			d.log.Warn("manifest directory watch error; re-reading", zap.Error(err))
			if timer == nil {
				timer = time.NewTimer(d.Debounce)
				fire = timer.C
			}
		case <-fire:
			timer, fire = nil, nil
			d.load(sink)
		}
	}
}

// addWatches watches every directory of the tree (fsnotify is not recursive).
func (d *DirSource) addWatches(w *fsnotify.Watcher) {
	_ = filepath.WalkDir(d.dir, func(path string, e fs.DirEntry, err error) error {
		if err == nil && e.IsDir() {
			if err := w.Add(path); err != nil {
				d.log.Warn("cannot watch directory", zap.String("dir", path), zap.Error(err))
			}
		}
		return nil
	})
}

func (d *DirSource) load(sink Sink) {
	rs, errs := LoadDir(d.dir)
	for _, err := range errs {
		var ce *conversionError
		if errors.As(err, &ce) {
			d.metrics.invalid.WithLabelValues(string(ce.kind)).Inc()
		}
		d.log.Warn("manifest skipped", zap.Error(err))
	}
	sink.Reset(api.Kinds, rs)
}

type conversionError struct {
	kind api.Kind
	err  error
}

func (e *conversionError) Error() string { return e.err.Error() }
func (e *conversionError) Unwrap() error { return e.err }

// LoadDir reads every manifest in the tree and converts the Pods and policy resources. It
// returns the objects (a later duplicate replaces an earlier one) and one error per
// document that could not be read or converted, naming its file and document number.
func LoadDir(dir string) ([]api.Resource, []error) {
	var files []string
	err := filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() {
			if path != dir && strings.HasPrefix(e.Name(), ".") {
				return filepath.SkipDir
			}
			return nil
		}
		switch strings.ToLower(filepath.Ext(path)) {
		case ".yaml", ".yml", ".json":
			if !strings.HasPrefix(e.Name(), ".") {
				files = append(files, path)
			}
		}
		return nil
	})
	if err != nil {
		return nil, []error{fmt.Errorf("read %s: %w", dir, err)}
	}
	sort.Strings(files)
	var out []api.Resource
	var errs []error
	index := map[api.Kind]map[string]int{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			errs = append(errs, fmt.Errorf("read %s: %w", f, err))
			continue
		}
		rs, es := DecodeManifests(f, b)
		errs = append(errs, es...)
		for _, r := range rs {
			if index[r.Kind] == nil {
				index[r.Kind] = map[string]int{}
			}
			if i, dup := index[r.Kind][r.Key.String()]; dup {
				errs = append(errs, fmt.Errorf("%s: %s %s defined again; the later definition wins", f, r.Kind, r.Key))
				out[i] = r
				continue
			}
			index[r.Kind][r.Key.String()] = len(out)
			out = append(out, r)
		}
	}
	return out, errs
}

// DecodeManifests decodes a stream of YAML or JSON documents (name is used in errors) and
// converts the Pods and policy resources in it, including the items of a kind List.
func DecodeManifests(name string, data []byte) ([]api.Resource, []error) {
	var out []api.Resource
	var errs []error
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for doc := 1; ; doc++ {
		var obj map[string]any
		err := dec.Decode(&obj)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: document %d: %w", name, doc, err))
			break // the decoder cannot resynchronise after a syntax error
		}
		if obj == nil {
			continue
		}
		u := &unstructured.Unstructured{Object: obj}
		items := []*unstructured.Unstructured{u}
		if u.IsList() {
			items = nil
			err := u.EachListItem(func(o runtime.Object) error {
				if it, ok := o.(*unstructured.Unstructured); ok {
					items = append(items, it)
				}
				return nil
			})
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: document %d: %w", name, doc, err))
			}
		}
		for _, it := range items {
			r, err := api.Convert(it, "default")
			var ign *api.ErrIgnored
			switch {
			case errors.As(err, &ign):
			case err != nil:
				k, _ := api.KindOf(it.GetAPIVersion(), it.GetKind())
				if k == "" {
					k = api.Kind(it.GetKind())
				}
				errs = append(errs, &conversionError{kind: k, err: fmt.Errorf("%s: document %d: %w", name, doc, err)})
			default:
				out = append(out, r)
			}
		}
	}
	return out, errs
}
