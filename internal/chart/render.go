package chart

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"sort"
	"strings"

	helmchart "helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/releaseutil"
	"helm.sh/helm/v3/pkg/strvals"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/meridian-mesh/meridian/deploy/charts"
)

// KubeVersion is the Kubernetes version rendering assumes (.Capabilities.KubeVersion), as
// the helm binary that `make kube-bin` builds does; the chart's kubeVersion range must
// admit it.
const KubeVersion = "v1.37.0"

// HAValuesFile is the chart's file of production overrides.
const HAValuesFile = "values-ha.yaml"

// Options say what to render. The zero value renders the chart's defaults into the
// namespace linkerd (which fails: the identity values are required).
type Options struct {
	// Namespace is the release namespace (default "linkerd"); ReleaseName the release's
	// name (default "meridian").
	Namespace, ReleaseName string
	// HA merges the chart's values-ha.yaml over its values.yaml.
	HA bool
	// Base values, merged after the HA values and before ValueFiles (cmd/meridian's
	// generated identity material, say). Not modified.
	Base map[string]any
	// ValueFiles are YAML files, merged in order (a later file wins), as helm's -f.
	ValueFiles []string
	// Set are helm --set assignments (a.b=c,d=e), applied in order after the files.
	Set []string
	// Cluster, when set, is the API server the templates' lookup reads (as helm install
	// does), so that what an earlier install generated (the gossip key, the webhook's
	// certificate) is kept; nil renders offline, where lookup finds nothing.
	Cluster *rest.Config
}

// Manifest is one rendered object.
type Manifest struct {
	Source  string // the template (or crds/ file) it came from, e.g. templates/destination.yaml
	Kind    string
	Name    string
	Content string // one YAML document, without the leading "---"
}

// Rendered is the output of Render: CRDs, then the templates' objects in Helm's install
// order.
type Rendered struct {
	CRDs      []Manifest
	Manifests []Manifest
	// Values are the values the templates saw (chart defaults coalesced with the user's).
	Values map[string]any
}

// Load returns the embedded chart.
func Load() (*helmchart.Chart, error) {
	src := charts.Meridian()
	var files []*loader.BufferedFile
	err := fs.WalkDir(src, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(src, path)
		if err != nil {
			return err
		}
		files = append(files, &loader.BufferedFile{Name: path, Data: b})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read the embedded chart: %w", err)
	}
	c, err := loader.LoadFiles(files)
	if err != nil {
		return nil, fmt.Errorf("load the embedded chart: %w", err)
	}
	return c, nil
}

// AppVersion returns the embedded chart's appVersion (the image tag it installs by default).
func AppVersion() (string, error) {
	c, err := Load()
	if err != nil {
		return "", err
	}
	return c.Metadata.AppVersion, nil
}

// UserValues merges what o gives over the chart's defaults' layer: the HA file (from c), Base,
// the files, then the --set assignments.
func UserValues(c *helmchart.Chart, o Options) (map[string]any, error) {
	vals := map[string]any{}
	if o.HA {
		var ha []byte
		for _, f := range c.Files {
			if f.Name == HAValuesFile {
				ha = f.Data
			}
		}
		if ha == nil {
			return nil, fmt.Errorf("the embedded chart has no %s", HAValuesFile)
		}
		m, err := parseValues(ha, HAValuesFile)
		if err != nil {
			return nil, err
		}
		vals = mergeMaps(vals, m)
	}
	vals = mergeMaps(vals, deepCopy(o.Base))
	for _, f := range o.ValueFiles {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("values file: %w", err)
		}
		m, err := parseValues(b, f)
		if err != nil {
			return nil, err
		}
		vals = mergeMaps(vals, m)
	}
	for _, s := range o.Set {
		if err := strvals.ParseInto(s, vals); err != nil {
			return nil, fmt.Errorf("--set %q: %w", short(s), err)
		}
	}
	return vals, nil
}

// EffectiveValues returns the values the templates would see for o: the chart's defaults
// coalesced with UserValues (not checked against the schema; Render does that).
func EffectiveValues(o Options) (map[string]any, error) {
	c, err := Load()
	if err != nil {
		return nil, err
	}
	user, err := UserValues(c, o)
	if err != nil {
		return nil, err
	}
	v, err := chartutil.CoalesceValues(c, user)
	if err != nil {
		return nil, err
	}
	return v.AsMap(), nil
}

// Render renders the embedded chart as o says.
func Render(o Options) (*Rendered, error) {
	c, err := Load()
	if err != nil {
		return nil, err
	}
	if o.Namespace == "" {
		o.Namespace = "linkerd"
	}
	if o.ReleaseName == "" {
		o.ReleaseName = "meridian"
	}
	if c.Metadata.KubeVersion != "" && !chartutil.IsCompatibleRange(c.Metadata.KubeVersion, KubeVersion) {
		return nil, fmt.Errorf("the chart needs Kubernetes %s, rendering assumes %s", c.Metadata.KubeVersion, KubeVersion)
	}
	user, err := UserValues(c, o)
	if err != nil {
		return nil, err
	}
	caps := chartutil.DefaultCapabilities.Copy()
	kv, err := chartutil.ParseKubeVersion(KubeVersion)
	if err != nil {
		return nil, err
	}
	caps.KubeVersion = *kv
	top, err := chartutil.ToRenderValues(c, user, chartutil.ReleaseOptions{Name: o.ReleaseName, Namespace: o.Namespace, Revision: 1, IsInstall: true}, caps)
	if err != nil {
		return nil, err
	}
	var files map[string]string
	if o.Cluster != nil {
		files, err = engine.RenderWithClient(c, top, o.Cluster)
	} else {
		files, err = engine.Render(c, top)
	}
	if err != nil {
		return nil, err
	}
	for name := range files {
		// NOTES.txt and partials are not manifests.
		if !strings.HasSuffix(name, ".yaml") {
			delete(files, name)
		}
	}
	hooks, sorted, err := releaseutil.SortManifests(files, nil, releaseutil.InstallOrder)
	if err != nil {
		return nil, fmt.Errorf("sort the rendered manifests: %w", err)
	}
	if len(hooks) > 0 {
		return nil, errors.New("the chart renders hooks, which `meridian install` cannot apply")
	}
	out := &Rendered{}
	if v, ok := top["Values"].(chartutil.Values); ok {
		out.Values = v.AsMap()
	}
	for _, crd := range c.CRDObjects() {
		for _, doc := range releaseutil.SplitManifests(string(crd.File.Data)) {
			if m, ok := manifest(crd.Name, doc); ok {
				out.CRDs = append(out.CRDs, m)
			}
		}
	}
	sort.SliceStable(out.CRDs, func(i, j int) bool { return out.CRDs[i].Name < out.CRDs[j].Name })
	for _, m := range sorted {
		if mm, ok := manifest(strings.TrimPrefix(m.Name, c.Name()+"/"), m.Content); ok {
			out.Manifests = append(out.Manifests, mm)
		}
	}
	return out, nil
}

// All returns the CRDs and then the manifests.
func (r *Rendered) All() []Manifest {
	return append(append([]Manifest(nil), r.CRDs...), r.Manifests...)
}

// YAML returns every object as one multi-document YAML stream, each with a "# Source:" line.
func (r *Rendered) YAML() []byte {
	var b bytes.Buffer
	for _, m := range r.All() {
		fmt.Fprintf(&b, "---\n# Source: %s\n%s\n", m.Source, strings.TrimSpace(m.Content))
	}
	return b.Bytes()
}

// manifest reads the kind and name of one YAML document; an empty document is dropped.
func manifest(source, doc string) (Manifest, bool) {
	var head struct {
		Kind     string `json:"kind"`
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	if err := yaml.Unmarshal([]byte(doc), &head); err != nil || head.Kind == "" {
		return Manifest{}, false
	}
	return Manifest{Source: source, Kind: head.Kind, Name: head.Metadata.Name, Content: strings.TrimSpace(doc)}, true
}

func parseValues(b []byte, name string) (map[string]any, error) {
	m := map[string]any{}
	if err := yaml.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("values file %s: %w", name, err)
	}
	return m, nil
}

// mergeMaps merges b into a, as helm's -f does: maps merge key by key, anything else in b
// replaces what a holds.
func mergeMaps(a, b map[string]any) map[string]any {
	out := make(map[string]any, len(a))
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		if bv, ok := v.(map[string]any); ok {
			if av, ok := out[k].(map[string]any); ok {
				out[k] = mergeMaps(av, bv)
				continue
			}
		}
		out[k] = v
	}
	return out
}

func deepCopy(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		if mv, ok := v.(map[string]any); ok {
			v = deepCopy(mv)
		}
		out[k] = v
	}
	return out
}

// short quotes at most the first 60 bytes of s.
func short(s string) string {
	if len(s) > 60 {
		return s[:60] + "..."
	}
	return s
}

// VersionLabel is a version as the chart writes it in the app.kubernetes.io/version label
// (the template meridian.versionLabel, which this must match): every character outside
// [A-Za-z0-9_.-] becomes "_", at most 63 bytes, without leading or trailing "_", "." or "-".
// `meridian check` compares its own version to the label in this form.
func VersionLabel(v string) string {
	v = labelUnsafe.ReplaceAllString(v, "_") // per character, as sprig's regexReplaceAll
	if len(v) > 63 {
		v = v[:63] // bytes, as sprig's trunc; only ASCII is left
	}
	return strings.Trim(v, "_.-")
}

var labelUnsafe = regexp.MustCompile(`[^A-Za-z0-9_.-]`)
