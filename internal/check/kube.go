package check

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"reflect"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/meridian-mesh/meridian/deploy/charts"
)

// component is one control-plane workload of the chart.
type component struct {
	name, kind, workload string
	adminPort            int // the binary's default, used when the pod names no admin-http port
}

// components are the chart's workloads, in the order they are reported.
var components = []component{
	{"destination", "StatefulSet", "linkerd-destination", 9996},
	{"identity", "Deployment", "linkerd-identity", 9990},
	{"proxy-injector", "Deployment", "linkerd-proxy-injector", 9995},
	{"policy", "Deployment", "linkerd-policy", 9997},
}

// workload is a component as found: its wanted replicas and its pods (not being deleted).
type workload struct {
	component
	replicas int
	pods     []corev1.Pod
}

func checkAPI(ctx context.Context, s *state) (Result, bool) {
	v, err := s.deps.Kube.Discovery().ServerVersion()
	if err != nil {
		return fail(err.Error(), "check the kubeconfig (--kubeconfig, $KUBECONFIG, ~/.kube/config) and that the API server is up"), true
	}
	return ok(v.GitVersion)
}

func checkNamespace(ctx context.Context, s *state) (Result, bool) {
	_, err := s.deps.Kube.CoreV1().Namespaces().Get(ctx, s.cfg.Namespace, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return fail("namespace "+s.cfg.Namespace+" not found",
			"install the control plane (helm install meridian deploy/charts/meridian -n "+s.cfg.Namespace+" --create-namespace -f values-identity.yaml, or meridian install | kubectl apply -f -), or pass --namespace"), true
	case err != nil:
		return fail(err.Error(), "check that your credentials may read namespaces"), true
	}
	return ok(s.cfg.Namespace)
}

// chartCRD is a CRD of the embedded chart: its name and its spec.versions, as JSON values.
type chartCRD struct {
	name     string
	versions []any
}

// chartCRDs returns the CRDs in the embedded chart's crds/ folder, by name.
func chartCRDs() ([]chartCRD, error) {
	src := charts.Meridian()
	files, err := fs.Glob(src, "crds/*.yaml")
	if err != nil {
		return nil, err
	}
	var crds []chartCRD
	for _, f := range files {
		b, err := fs.ReadFile(src, f)
		if err != nil {
			return nil, err
		}
		for _, doc := range strings.Split(string(b), "\n---") {
			var crd struct {
				Kind     string `json:"kind"`
				Metadata struct {
					Name string `json:"name"`
				} `json:"metadata"`
				Spec struct {
					Versions []any `json:"versions"`
				} `json:"spec"`
			}
			if err := yaml.Unmarshal([]byte(doc), &crd); err != nil {
				return nil, fmt.Errorf("%s: %w", path.Base(f), err)
			}
			if crd.Kind == "CustomResourceDefinition" {
				crds = append(crds, chartCRD{name: crd.Metadata.Name, versions: crd.Spec.Versions})
			}
		}
	}
	sort.Slice(crds, func(i, j int) bool { return crds[i].name < crds[j].name })
	return crds, nil
}

// crdDrift returns how the installed CRD got differs from the chart's want ("" when it does
// not): a version the chart defines that got lacks, or one whose fields differ (those the
// chart sets: whether it is served or stored, its schema, subresources, printer columns).
// Helm installs a chart's crds/ but never upgrades them, so after an upgrade a CRD may be an
// older release's: its schema then prunes the fields the new release reads.
//
// A CRD that is not Meridian's (without the chart's app.kubernetes.io/part-of label: Linkerd's
// linkerd-crds chart installed it, say) is not compared: it may be newer on purpose, and
// applying this release's over it would take fields from its owner.
func crdDrift(want chartCRD, got *unstructured.Unstructured) string {
	if got.GetLabels()[partOfLabel] != partOfMeridian {
		return ""
	}
	installed, _, _ := unstructured.NestedSlice(got.Object, "spec", "versions")
	byName := map[string]map[string]any{}
	for _, v := range installed {
		if m, ok := v.(map[string]any); ok {
			name, _ := m["name"].(string)
			byName[name] = m
		}
	}
	var diffs []string
	for _, v := range want.versions {
		wv, _ := v.(map[string]any)
		name, _ := wv["name"].(string)
		gv, ok := byName[name]
		if !ok {
			diffs = append(diffs, "version "+name+" is missing")
			continue
		}
		var fields []string
		for k, w := range wv {
			if !sameJSON(w, gv[k]) {
				fields = append(fields, k)
			}
		}
		if len(fields) > 0 {
			sort.Strings(fields)
			diffs = append(diffs, "version "+name+": "+strings.Join(fields, ", ")+" differ")
		}
	}
	return strings.Join(diffs, "; ")
}

// sameJSON reports whether a and b encode to the same JSON value (numbers compared as JSON
// numbers: the chart's YAML and the API server's JSON type them differently).
func sameJSON(a, b any) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	if errA != nil || errB != nil {
		return false
	}
	var va, vb any
	if json.Unmarshal(ja, &va) != nil || json.Unmarshal(jb, &vb) != nil {
		return false
	}
	return reflect.DeepEqual(va, vb)
}

// partOfLabel and partOfMeridian mark the chart's CRDs.
const partOfLabel, partOfMeridian = "app.kubernetes.io/part-of", "meridian"

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

func checkCRDs(ctx context.Context, s *state) (Result, bool) {
	want, err := chartCRDs()
	if err != nil {
		return fail("read the chart's CRDs: "+err.Error(), "this binary is broken; rebuild it"), false
	}
	var problems, stale []string
	for _, crd := range want {
		u, err := s.deps.Dynamic.Resource(crdResource).Get(ctx, crd.name, metav1.GetOptions{})
		if err != nil {
			problems = append(problems, crd.name+": "+err.Error())
			continue
		}
		if !established(u) {
			problems = append(problems, crd.name+": not Established yet")
		}
		if d := crdDrift(crd, u); d != "" {
			stale = append(stale, crd.name+": "+d)
		}
	}
	if len(problems) > 0 {
		return fail(fmt.Sprintf("%d of %d CRDs missing or not established", len(problems), len(want)),
			"install them: helm installs the chart's crds/ folder; or kubectl apply -f deploy/charts/meridian/crds/", problems...), false
	}
	if len(stale) > 0 {
		return fail(fmt.Sprintf("%d of %d CRDs differ from this release's", len(stale), len(want)),
			"helm upgrade does not update the chart's crds/: kubectl apply --server-side -f deploy/charts/meridian/crds/ (from this release)", stale...), false
	}
	return ok(fmt.Sprintf("%d CRDs", len(want)))
}

func established(u *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Established" && m["status"] == "True" {
			return true
		}
	}
	return false
}

// loadWorkloads finds each component's workload and pods; a missing workload is an error
// line.
func loadWorkloads(ctx context.Context, s *state) []string {
	s.workloads = map[string]*workload{}
	var problems []string
	apps := s.deps.Kube.AppsV1()
	for _, c := range components {
		var replicas *int32
		var sel *metav1.LabelSelector
		switch c.kind {
		case "StatefulSet":
			o, err := apps.StatefulSets(s.cfg.Namespace).Get(ctx, c.workload, metav1.GetOptions{})
			if err != nil {
				problems = append(problems, fmt.Sprintf("%s %s: %v", c.kind, c.workload, err))
				continue
			}
			replicas, sel = o.Spec.Replicas, o.Spec.Selector
		default:
			o, err := apps.Deployments(s.cfg.Namespace).Get(ctx, c.workload, metav1.GetOptions{})
			if err != nil {
				problems = append(problems, fmt.Sprintf("%s %s: %v", c.kind, c.workload, err))
				continue
			}
			replicas, sel = o.Spec.Replicas, o.Spec.Selector
		}
		w := &workload{component: c, replicas: 1}
		if replicas != nil {
			w.replicas = int(*replicas)
		}
		selector, err := metav1.LabelSelectorAsSelector(sel)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s %s: selector: %v", c.kind, c.workload, err))
			continue
		}
		pods, err := s.deps.Kube.CoreV1().Pods(s.cfg.Namespace).List(ctx, metav1.ListOptions{LabelSelector: selector.String()})
		if err != nil {
			problems = append(problems, fmt.Sprintf("pods of %s: %v", c.workload, err))
			continue
		}
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil {
				w.pods = append(w.pods, p)
			}
		}
		sort.Slice(w.pods, func(i, j int) bool { return w.pods[i].Name < w.pods[j].Name })
		s.workloads[c.name] = w
	}
	return problems
}

func checkPods(ctx context.Context, s *state) (Result, bool) {
	problems := loadWorkloads(ctx, s)
	total, ready := 0, 0
	for _, c := range components {
		w := s.workloads[c.name]
		if w == nil {
			continue
		}
		n := 0
		var notReady []string
		for i := range w.pods {
			if podReady(&w.pods[i]) {
				n++
			} else {
				notReady = append(notReady, w.pods[i].Name+" is not ready"+whyNotReady(&w.pods[i]))
			}
		}
		total += w.replicas
		ready += min(n, w.replicas)
		if n < w.replicas {
			problems = append(problems, fmt.Sprintf("%s: %d of %d pods ready", w.workload, n, w.replicas))
		}
		problems = append(problems, notReady...)
	}
	if len(problems) > 0 {
		return fail(fmt.Sprintf("%d of %d pods ready", ready, total),
			fmt.Sprintf("kubectl -n %s describe pod NAME and kubectl -n %s logs NAME say why; run meridian check again once they are ready", s.cfg.Namespace, s.cfg.Namespace),
			problems...), false
	}
	return ok(fmt.Sprintf("%d pods", total))
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func whyNotReady(p *corev1.Pod) string {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status != corev1.ConditionTrue {
			msg := strings.TrimSpace(c.Reason + " " + c.Message)
			if msg != "" {
				return " (" + short(msg) + ")"
			}
		}
	}
	if p.Status.Phase != "" {
		return " (phase " + string(p.Status.Phase) + ")"
	}
	return ""
}

// versionLabel is the label each control-plane pod carries its version in.
const versionLabel = "app.kubernetes.io/version"

func checkVersion(ctx context.Context, s *state) (Result, bool) {
	if s.workloads == nil {
		loadWorkloads(ctx, s)
	}
	byVersion := map[string][]string{}
	for _, c := range components {
		if w := s.workloads[c.name]; w != nil {
			for _, p := range w.pods {
				v := p.Labels[versionLabel]
				byVersion[v] = append(byVersion[v], p.Name)
			}
		}
	}
	if len(byVersion) == 0 {
		return fail("no control-plane pods found", "install the control plane first"), false
	}
	var details []string
	for v, pods := range byVersion {
		if v != s.cfg.CLIVersion {
			if v == "" {
				v = "(no " + versionLabel + " label)"
			}
			details = append(details, fmt.Sprintf("%s: %s", v, strings.Join(pods, ", ")))
		}
	}
	if len(details) > 0 {
		sort.Strings(details)
		return fail("the CLI is "+s.cfg.CLIVersion+", the control plane runs another version",
			"upgrade the control plane to the CLI's version (helm upgrade, or meridian install | kubectl apply -f -), or use the CLI of the control plane's version",
			details...), false
	}
	return ok(s.cfg.CLIVersion)
}

func short(s string) string {
	if len(s) > 120 {
		return s[:120] + "..."
	}
	return s
}
