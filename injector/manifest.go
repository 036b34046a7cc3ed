package injector

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/meridian-mesh/meridian/internal/manifest"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// ManifestOptions configure the manifest transform behind `meridian inject`.
type ManifestOptions struct {
	// Manual materialises the proxy and init containers (as the webhook would); otherwise
	// linkerd.io/inject: enabled is added to each pod template and the webhook does the rest.
	Manual bool
	// Config is the injection configuration used in Manual mode.
	Config Config
	// FlagValues maps a config.linkerd.io/* annotation to the command-line flag that set the
	// same default ("--proxy-cpu-request=100m"). When an input carries that annotation, the
	// annotation wins and the report says so. Without Manual, each flag's value is written
	// onto the pod template as its annotation (as Linkerd's CLI does), for the webhook.
	FlagValues map[string]string
}

// ReportLine says what happened to one workload.
type ReportLine struct {
	Resource string // "deployment/web"
	Injected bool
	Reason   string // skip reason, or a note
	// Warning marks a line that reports an ignored annotation (Reason is the Warning's
	// text); the workload's outcome is on a line of its own.
	Warning bool
}

func (l ReportLine) String() string {
	if l.Warning {
		return l.Resource + ": warning: " + l.Reason
	}
	if l.Injected {
		if l.Reason != "" {
			return l.Resource + ": " + l.Reason
		}
		return l.Resource + " injected"
	}
	return l.Resource + " skipped: " + l.Reason
}

// templatePaths says where each workload kind keeps its pod template ("" for a Pod).
var templatePaths = map[string][]string{
	"Pod":                   nil,
	"Deployment":            {"spec", "template"},
	"StatefulSet":           {"spec", "template"},
	"DaemonSet":             {"spec", "template"},
	"ReplicaSet":            {"spec", "template"},
	"ReplicationController": {"spec", "template"},
	"Job":                   {"spec", "template"},
	"CronJob":               {"spec", "jobTemplate", "spec", "template"},
}

// InjectManifests reads multi-document YAML (or JSON) from r and writes it to w with every
// workload's pod template injected or annotated. Documents that are not workloads pass
// through unchanged, byte for byte; Lists are processed item by item. The returned lines
// report each workload, including the annotations that overrode command-line flags. name
// names the input in errors, which are *manifest.FileError values ("name:line: reason",
// the line being the document's, or the problem's for YAML that does not parse).
func InjectManifests(name string, r io.Reader, w io.Writer, opts ManifestOptions) ([]ReportLine, error) {
	if opts.Manual {
		if err := opts.Config.Validate(); err != nil {
			return nil, err
		}
	}
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	var report []ReportLine
	first := true
	for _, doc := range manifest.SplitDocuments(data) {
		if doc.Blank() {
			continue
		}
		out, lines, err := injectDocument(name, doc, opts)
		if err != nil {
			return report, err
		}
		report = append(report, lines...)
		if !first {
			if _, err := io.WriteString(w, "---\n"); err != nil {
				return report, err
			}
		}
		first = false
		if _, err := w.Write(out); err != nil {
			return report, err
		}
		if len(out) > 0 && out[len(out)-1] != '\n' {
			if _, err := io.WriteString(w, "\n"); err != nil {
				return report, err
			}
		}
	}
	return report, nil
}

// injectDocument returns the document to write: the original bytes when nothing changed.
func injectDocument(name string, doc manifest.Document, opts ManifestOptions) ([]byte, []ReportLine, error) {
	// YAML may be UTF-16 (Windows PowerShell's > writes it), which the parser reads; but a
	// document passed through as it is would then sit in a UTF-8 stream, with our separators
	// and newlines, and no longer read. Refuse it with what to do.
	if !utf8.Valid(doc.Text) {
		return nil, nil, &manifest.FileError{File: name, Line: doc.Line,
			Err: errors.New("the document is not UTF-8 text (a UTF-16 file, as Windows PowerShell's > writes, must be saved as UTF-8 first)")}
	}
	// Parse first for the problems' lines in the file (YAMLToJSON's are relative to the
	// document), and to refuse a second document in this one ("--- {...}"), which YAMLToJSON
	// would drop.
	if _, err := doc.Parse(name); err != nil {
		return nil, nil, err
	}
	js, err := yaml.YAMLToJSON(doc.Text)
	if err != nil {
		return nil, nil, &manifest.FileError{File: name, Line: doc.Line, Err: fmt.Errorf("parse YAML: %w", err)}
	}
	var obj map[string]any
	if err := json.Unmarshal(js, &obj); err != nil || obj == nil {
		return doc.Text, nil, nil // not an object: pass through
	}
	changed, lines, err := injectObject(obj, opts)
	if err != nil {
		return nil, lines, &manifest.FileError{File: name, Line: doc.Line, Err: err}
	}
	if !changed {
		return doc.Text, lines, nil
	}
	js, err = json.Marshal(obj)
	if err != nil {
		return nil, nil, err
	}
	out, err := yaml.JSONToYAML(js)
	return out, lines, err
}

// annotateTemplate adds linkerd.io/inject: enabled to a pod template that should be
// injected (the webhook does the rest), with the annotation of each flag (flags: annotation
// -> "--flag=value") the template does not carry, and says what it did.
func annotateTemplate(tmpl map[string]any, pt *corev1.PodTemplateSpec, namespace, resource string, flags map[string]string) (bool, ReportLine) {
	d := Decide(Meta{}, Workload{Namespace: namespace, Labels: pt.Labels, Annotations: pt.Annotations, Spec: &pt.Spec}, true)
	if !d.Inject {
		return false, ReportLine{Resource: resource, Reason: d.Reason}
	}
	tmeta, _ := tmpl["metadata"].(map[string]any)
	if tmeta == nil {
		tmeta = map[string]any{}
		tmpl["metadata"] = tmeta
	}
	ann, _ := tmeta["annotations"].(map[string]any)
	if ann == nil {
		ann = map[string]any{}
		tmeta["annotations"] = ann
	}
	changed := false
	for a, flag := range flags {
		if _, ok := ann[a]; !ok {
			_, v, _ := strings.Cut(flag, "=")
			ann[a], changed = v, true
		}
	}
	if ann[AnnotationInject] == InjectEnabled || ann[AnnotationInject] == InjectIngress {
		return changed, ReportLine{Resource: resource, Injected: true, Reason: "already annotated"}
	}
	ann[AnnotationInject] = InjectEnabled
	return true, ReportLine{Resource: resource, Injected: true}
}

func injectObject(obj map[string]any, opts ManifestOptions) (bool, []ReportLine, error) {
	kind, _ := obj["kind"].(string)
	if items, ok := obj["items"].([]any); ok && strings.HasSuffix(kind, "List") {
		var lines []ReportLine
		changed := false
		for i, it := range items {
			m, ok := it.(map[string]any)
			if !ok {
				continue
			}
			c, l, err := injectObject(m, opts)
			if err != nil {
				return false, lines, fmt.Errorf("item %d: %w", i, err)
			}
			changed = changed || c
			lines = append(lines, l...)
			items[i] = m
		}
		return changed, lines, nil
	}
	path, ok := templatePaths[kind]
	if !ok {
		return false, nil, nil
	}
	meta, _ := obj["metadata"].(map[string]any)
	name, _ := meta["name"].(string)
	namespace, _ := meta["namespace"].(string)
	resource := strings.ToLower(kind) + "/" + name

	parent, key := obj, ""
	tmpl := obj
	for i, p := range path {
		next, ok := tmpl[p].(map[string]any)
		if !ok {
			return false, []ReportLine{{Resource: resource, Reason: "no pod template at ." + strings.Join(path[:i+1], ".")}}, nil
		}
		parent, key, tmpl = tmpl, p, next
	}
	tjs, err := json.Marshal(tmpl)
	if err != nil {
		return false, nil, err
	}
	var pt corev1.PodTemplateSpec
	if err := decodeJSON(tjs, &pt); err != nil {
		return false, []ReportLine{{Resource: resource, Reason: ReasonInvalidPod + ": " + err.Error()}}, nil
	}
	if len(pt.Spec.Containers) == 0 {
		return false, []ReportLine{{Resource: resource, Reason: ReasonInvalidPod + ": pod template has no containers"}}, nil
	}
	owner := Owner{Kind: strings.ToLower(kind), Name: name}
	if !opts.Manual {
		changed, line := annotateTemplate(tmpl, &pt, namespace, resource, opts.FlagValues)
		return changed, []ReportLine{line}, nil
	}

	out := opts.Config.ReviewOwned(Meta{}, namespace, &pt.ObjectMeta, &pt.Spec, owner, true)
	var lines []ReportLine
	for _, w := range out.Warnings {
		lines = append(lines, ReportLine{Resource: resource, Injected: out.Decision.Inject, Warning: true, Reason: w.String()})
	}
	for _, n := range out.Notes {
		lines = append(lines, ReportLine{Resource: resource, Injected: true, Warning: true, Reason: n})
	}
	if !out.Decision.Inject {
		reason := out.Decision.Reason
		if out.Detail != "" {
			reason += ": " + out.Detail
		}
		return false, append(lines, ReportLine{Resource: resource, Reason: reason}), nil
	}
	for _, a := range out.Values.Overridden {
		if flag, ok := opts.FlagValues[a]; ok {
			lines = append(lines, ReportLine{Resource: resource, Injected: true,
				Reason: fmt.Sprintf("annotation %s=%s takes precedence over %s", a, pt.Annotations[a], flag)})
		}
	}
	lines = append(lines, ReportLine{Resource: resource, Injected: true})

	// Apply the webhook's own patch to the template, so unknown fields survive.
	if _, ok := tmpl["metadata"].(map[string]any); !ok {
		tmpl["metadata"] = map[string]any{}
	}
	tjs, err = json.Marshal(tmpl)
	if err != nil {
		return false, nil, err
	}
	pb, err := MarshalPatch(out.Mutation.Patch("", &pt.ObjectMeta, &pt.Spec))
	if err != nil {
		return false, nil, err
	}
	patch, err := jsonpatch.DecodePatch(pb)
	if err != nil {
		return false, nil, err
	}
	patched, err := patch.Apply(tjs)
	if err != nil {
		return false, nil, fmt.Errorf("%s: apply patch: %w", resource, err)
	}
	var nt map[string]any
	if err := json.Unmarshal(patched, &nt); err != nil {
		return false, nil, err
	}
	if key == "" {
		// A Pod: the template is the object itself.
		for k := range obj {
			delete(obj, k)
		}
		for k, v := range nt {
			obj[k] = v
		}
	} else {
		parent[key] = nt
	}
	return true, lines, nil
}
