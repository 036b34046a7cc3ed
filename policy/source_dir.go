package policy

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/meridian-mesh/meridian/internal/manifest"
	"github.com/meridian-mesh/meridian/policy/api"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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
// Lists) from a directory tree through internal/manifest and delivers the Pods and policy
// resources among them, converted by package policy/api; other kinds are skipped, and
// objects without a namespace are put in "default".
//
// A bad input never widens a policy: a file that does not parse, or holds an object that
// fails conversion (an invalid field in a Server, say), keeps every object of its last good
// version, so WatchPort streams keep the policy they have; a file that has had no good
// version yet delivers the objects that convert (a valid Server applies beside a broken
// neighbour rather than leaving its pods on the default policy). The problem is logged at warn
// once, counted in policy_invalid_resources_total (conversion failures, once per version of
// the file that has them), shown in manifest_errors{file} and in /ready's warnings
// (Warnings); the controller stays ready, serving the last good state. A value conversion
// ignores (api.Resource.Warnings: a Server's accessPolicy none of Linkerd's, which then
// denies by default) is reported the same way, and its object applies. The first definition
// of an object (in lexical path order) wins and later ones are reported; files over
// 16 MiB are refused; the directory is rescanned every 2 s besides file notifications, so a
// replaced directory is read again. Each change reaches the Sink as one Reset, so a stream
// never sees half of it.
type DirSource struct {
	m *manifest.Dir
}

var _ Source = (*DirSource)(nil)

// kindOrder is the order of kinds in deliveries.
var kindOrder = func() []string {
	out := make([]string, len(api.Kinds))
	for i, k := range api.Kinds {
		out[i] = string(k)
	}
	return out
}()

// NewDirSource returns a source for cfg.Path (see manifest.DefaultConfig for the other
// settings; cfg.Order is set here). manifest_errors is registered on reg (nil: not
// registered); metrics may be nil.
func NewDirSource(cfg manifest.Config, reg prometheus.Registerer, log *zap.Logger, metrics *Metrics) *DirSource {
	if metrics == nil {
		metrics = NewMetrics(nil)
	}
	cfg.Order = kindOrder
	return &DirSource{m: manifest.NewDir(cfg, dirDecoder(metrics), reg, log.With(zap.String("source", "dir")))}
}

// Synced reports whether the directory has been read once.
func (d *DirSource) Synced() bool { return d.m.Synced() }

// Ready implements run.Readier: nil once the directory has been read once.
func (d *DirSource) Ready() error { return d.m.Ready() }

// Warnings implements run.Warner: one "file:line: reason" line per current problem.
func (d *DirSource) Warnings() []string { return d.m.Warnings() }

// Errors returns the current problems, each a *manifest.FileError; nil when there are none.
func (d *DirSource) Errors() []error { return d.m.Errors() }

// Run reads the tree, delivers it with Sink.Reset, and delivers every change the same way
// until ctx ends. It fails at once when the directory cannot be read at the start.
func (d *DirSource) Run(ctx context.Context, sink Sink) error {
	return d.m.Run(ctx, func(u manifest.Update) {
		rs := make([]api.Resource, 0, len(u.All))
		for _, o := range u.All {
			rs = append(rs, o.Value.(api.Resource))
		}
		sink.Reset(api.Kinds, rs)
	})
}

// DecodeManifests decodes a stream of YAML or JSON documents (name is used in errors) and
// converts the Pods and policy resources in it, including the items of Lists. The errors are
// *manifest.FileError values ("name:line: reason"). An object defined twice is returned once,
// its first definition, as the directory source keeps it (the later one is among the errors).
func DecodeManifests(name string, data []byte) ([]api.Resource, []error) {
	res := dirDecoder(NewMetrics(nil)).Decode(name, data)
	objs := manifest.FirstOfEach(res.Objects)
	out := make([]api.Resource, len(objs))
	for i, o := range objs {
		out[i] = o.Value.(api.Resource)
	}
	return out, res.Errors
}

// dirDecoder decodes Pods (v1) and the policy.linkerd.io kinds (any version: conversion
// says which it serves) with api.Convert, counting conversion failures in metrics.
func dirDecoder(metrics *Metrics) *manifest.Decoder {
	decode := func(tm manifest.TypeMeta, data []byte) (manifest.Decoded, error) {
		var obj map[string]any
		if err := json.Unmarshal(data, &obj); err != nil {
			return manifest.Decoded{}, err
		}
		u := &unstructured.Unstructured{Object: obj}
		u.SetAPIVersion(tm.APIVersion) // an item of a typed list may not say
		u.SetKind(tm.Kind)
		r, err := api.Convert(u, "default")
		if err == nil {
			d := manifest.Decoded{Namespace: r.Key.Namespace, Name: r.Key.Name, Value: r}
			for _, w := range r.Warnings {
				d.Warnings = append(d.Warnings, manifest.FieldOf(w))
			}
			return d, nil
		}
		metrics.invalid.WithLabelValues(tm.Kind).Inc()
		ns := u.GetNamespace()
		if ns == "" {
			ns = "default"
		}
		return manifest.Decoded{Namespace: ns, Name: u.GetName()}, conversionError(tm.Kind+" "+ns+"/"+u.GetName()+": ", err)
	}
	kinds := []manifest.Kind{{Kind: string(api.KindPod), Versions: []string{"v1"}, Decode: decode}}
	for _, k := range api.Kinds {
		if k != api.KindPod {
			kinds = append(kinds, manifest.Kind{Group: api.Group, Kind: string(k), Decode: decode})
		}
	}
	return manifest.NewDecoder(kinds...)
}

// conversionError drops the object's name from a conversion error (the loader names it) and
// places it at the field it is about.
func conversionError(prefix string, err error) error {
	msg, ok := strings.CutPrefix(err.Error(), prefix)
	if !ok {
		return err
	}
	return manifest.FieldOf(msg)
}
