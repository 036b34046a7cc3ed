package injector

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meridian-mesh/meridian/internal/manifest"
	corev1 "k8s.io/api/core/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/inject")

func manualOptions() ManifestOptions {
	cfg := DefaultConfig()
	cfg.CreatedBy = "meridian/cli test"
	cfg.Proxy.Version = "v0.0.0-test"
	cfg.Proxy.CPURequest = "100m"
	cfg.Proxy.MemoryLimit = "250Mi"
	cfg.TrustAnchorsPEM = "-----BEGIN CERTIFICATE-----\nTEST\n-----END CERTIFICATE-----\n"
	return ManifestOptions{Manual: true, Config: cfg, FlagValues: map[string]string{
		AnnotationProxyCPURequest:  "--proxy-cpu-request=100m",
		AnnotationProxyMemoryLimit: "--proxy-memory-limit=250Mi",
	}}
}

// TestInjectGolden runs `meridian inject` (default and --manual) over every input under
// testdata/inject and compares output and report with the golden files. Run with -update to
// rewrite them after an intended change, and review the diff.
func TestInjectGolden(t *testing.T) {
	inputs, err := filepath.Glob("testdata/inject/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var n int
	for _, in := range inputs {
		if strings.Contains(in, ".golden") {
			continue
		}
		n++
		for _, mode := range []struct {
			suffix string
			opts   ManifestOptions
		}{{".golden", ManifestOptions{}}, {".manual.golden", manualOptions()}} {
			base := strings.TrimSuffix(in, ".yaml")
			t.Run(filepath.Base(base)+mode.suffix, func(t *testing.T) {
				src, err := os.ReadFile(in)
				if err != nil {
					t.Fatal(err)
				}
				var out bytes.Buffer
				report, err := InjectManifests(in, bytes.NewReader(src), &out, mode.opts)
				if err != nil {
					t.Fatal(err)
				}
				out.WriteString("# report:\n")
				for _, l := range report {
					out.WriteString("#   " + l.String() + "\n")
				}
				golden := base + mode.suffix + ".yaml"
				if *update {
					if err := os.WriteFile(golden, out.Bytes(), 0o644); err != nil {
						t.Fatal(err)
					}
				}
				want, err := os.ReadFile(golden)
				if err != nil {
					t.Fatalf("%v (run go test -run TestInjectGolden -update ./injector)", err)
				}
				if !bytes.Equal(out.Bytes(), want) {
					t.Fatalf("output differs from %s (rerun with -update and review the diff):\n%s", golden, out.Bytes())
				}
				checkManifestOutput(t, out.Bytes(), mode.opts.Manual)
			})
		}
	}
	if n == 0 {
		t.Fatal("no inputs")
	}
}

// checkManifestOutput re-reads the output and checks its semantics independently of the
// golden bytes: every document parses, and injected templates have the expected shape.
func checkManifestOutput(t *testing.T, out []byte, manual bool) {
	t.Helper()
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(out)))
	for {
		doc, err := r.Read()
		if err != nil {
			break
		}
		if isBlankYAML(doc) {
			continue // kubectl's reader returns comment-only documents
		}
		js, err := yaml.YAMLToJSON(doc)
		if err != nil {
			t.Fatalf("output document does not parse: %v\n%s", err, doc)
		}
		var obj map[string]any
		if err := json.Unmarshal(js, &obj); err != nil {
			t.Fatal(err)
		}
		checkTemplates(t, obj, manual)
	}
}

func checkTemplates(t *testing.T, obj map[string]any, manual bool) {
	t.Helper()
	kind, _ := obj["kind"].(string)
	if items, ok := obj["items"].([]any); ok {
		for _, it := range items {
			if m, ok := it.(map[string]any); ok {
				checkTemplates(t, m, manual)
			}
		}
		return
	}
	path, ok := templatePaths[kind]
	if !ok {
		return
	}
	tmpl := obj
	for _, p := range path {
		tmpl = tmpl[p].(map[string]any)
	}
	js, _ := json.Marshal(tmpl)
	var pt corev1.PodTemplateSpec
	if err := json.Unmarshal(js, &pt); err != nil {
		t.Fatalf("%s template does not decode: %v", kind, err)
	}
	if pt.Annotations[AnnotationInject] == InjectDisabled || pt.Spec.HostNetwork {
		return
	}
	if !manual {
		if v := pt.Annotations[AnnotationInject]; v != InjectEnabled && v != InjectIngress && !HasSidecar(&pt.Spec) {
			t.Errorf("%s template not annotated: %v", kind, pt.Annotations)
		}
		return
	}
	if !HasSidecar(&pt.Spec) {
		t.Errorf("%s template not injected", kind)
	}
}

func TestInjectManualPrecedence(t *testing.T) {
	src, err := os.ReadFile("testdata/inject/overrides.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	report, err := InjectManifests("overrides.yaml", bytes.NewReader(src), &out, manualOptions())
	if err != nil {
		t.Fatal(err)
	}
	var notes []string
	for _, l := range report {
		notes = append(notes, l.String())
	}
	joined := strings.Join(notes, "\n")
	if !strings.Contains(joined, "config.linkerd.io/proxy-cpu-request=500m takes precedence over --proxy-cpu-request=100m") {
		t.Errorf("report lacks the precedence note:\n%s", joined)
	}
	if strings.Contains(joined, "proxy-memory-limit") {
		t.Errorf("report mentions a flag no annotation overrode:\n%s", joined)
	}
	if !strings.Contains(out.String(), "cpu: 500m") || !strings.Contains(out.String(), "memory: 250Mi") {
		t.Errorf("resources: annotation should give cpu 500m and the flag memory 250Mi:\n%s", out.String())
	}
}

func TestInjectManifestErrors(t *testing.T) {
	// Errors name the input and the line: of the problem for YAML that does not parse, of
	// the document otherwise.
	for name, tc := range map[string]struct{ src, err string }{
		"bad yaml":                 {"kind: Deployment\nspec: [\n", "stdin:2: yaml: did not find expected node content"},
		"bad yaml in a later doc":  {"kind: Service\n---\n# c\nkind: Deployment\nspec:\n  a: b\n c: d\n", "stdin:4: yaml: did not find expected key"},
		"a tab":                    {"kind: Pod\nspec:\n\tcontainers: []\n", "stdin:3: yaml: found character that cannot start any token"},
		"two documents in one doc": {"kind: Pod\n--- {kind: Pod}\n", "stdin:2: yaml: a second document starts here"},
	} {
		_, err := InjectManifests("stdin", strings.NewReader(tc.src), &bytes.Buffer{}, ManifestOptions{})
		var fe *manifest.FileError
		if err == nil || !errors.As(err, &fe) || !strings.HasPrefix(err.Error(), tc.err) {
			t.Errorf("%s: error %v, want one starting %q", name, err, tc.err)
		}
	}
	// A workload whose template does not decode is reported, not fatal, and passed through.
	var out bytes.Buffer
	src := "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\nspec:\n  template:\n    spec:\n      containers: 3\n"
	report, err := InjectManifests("stdin", strings.NewReader(src), &out, ManifestOptions{})
	if err != nil || len(report) != 1 || report[0].Injected || !strings.Contains(report[0].Reason, ReasonInvalidPod) {
		t.Fatalf("report %v err %v", report, err)
	}
	if out.String() != src {
		t.Errorf("undecodable document changed:\n%s", out.String())
	}
}

func FuzzInjectManifests(f *testing.F) {
	for _, p := range []string{"deployment.yaml", "workloads.yaml", "list.yaml", "skips.yaml", "overrides.yaml"} {
		b, err := os.ReadFile(filepath.Join("testdata/inject", p))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, false)
		f.Add(b, true)
	}
	f.Add([]byte("kind: List\nitems: [1, {kind: Pod}]\n"), true)
	f.Add([]byte("kind: CronJob\nspec: {jobTemplate: {spec: {template: 4}}}\n"), true)
	manual := manualOptions()
	f.Fuzz(func(t *testing.T, src []byte, isManual bool) {
		opts := ManifestOptions{}
		if isManual {
			opts = manual
		}
		var out bytes.Buffer
		if _, err := InjectManifests("fuzz", bytes.NewReader(src), &out, opts); err != nil {
			return
		}
		// Whatever was written must itself be readable, and injecting it again must not fail.
		if _, err := InjectManifests("fuzz output", bytes.NewReader(out.Bytes()), &bytes.Buffer{}, opts); err != nil {
			t.Fatalf("output does not re-read: %v\n%s", err, out.Bytes())
		}
	})
}

func isBlankYAML(doc []byte) bool {
	for _, line := range strings.Split(string(doc), "\n") {
		l := strings.TrimSpace(line)
		if l != "" && !strings.HasPrefix(l, "#") && l != "---" {
			return false
		}
	}
	return true
}

// TestInjectManifestKeysAreCaseSensitive: as the API server reads them, a template's
// "Annotations" is not its annotations (TestWebhookKeysAreCaseSensitive for the webhook).
func TestInjectManifestKeysAreCaseSensitive(t *testing.T) {
	src := "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x, namespace: apps}\nspec:\n  template:\n" +
		"    metadata:\n      Annotations: {linkerd.io/inject: disabled}\n    spec:\n      containers: [{name: a, image: a}]\n"
	var out bytes.Buffer
	report, err := InjectManifests("stdin", strings.NewReader(src), &out, manualOptions())
	if err != nil {
		t.Fatal(err)
	}
	if len(report) != 1 || !report[0].Injected {
		t.Fatalf("report %v, want the deployment injected", report)
	}
	if !strings.Contains(out.String(), "linkerd-proxy") || !strings.Contains(out.String(), "Annotations:") {
		t.Errorf("want the proxy injected and the unknown key kept:\n%s", out.String())
	}
}

// TestInjectRefusesUTF16: a UTF-16 document (Windows PowerShell's > writes one) is refused
// with what to do. The YAML parser reads UTF-16, but such a document passed through as it
// was sat in a UTF-8 stream, with a newline after it, and the output no longer read (found
// by FuzzInjectManifests: testdata/fuzz/FuzzInjectManifests/c56c6ec761b34689).
func TestInjectRefusesUTF16(t *testing.T) {
	utf16 := func(s string) []byte {
		b := []byte{0xff, 0xfe} // the little-endian byte-order mark
		for _, r := range s {
			b = append(b, byte(r), 0)
		}
		return b
	}
	src := append([]byte("kind: ConfigMap\n---\n"), utf16("kind: ConfigMap\nmetadata: {name: x}\n")...)
	var out bytes.Buffer
	_, err := InjectManifests("in.yaml", bytes.NewReader(src), &out, ManifestOptions{})
	if err == nil || !strings.Contains(err.Error(), "in.yaml:3:") || !strings.Contains(err.Error(), "not UTF-8") {
		t.Fatalf("error %v, want one at in.yaml:3 saying the document is not UTF-8", err)
	}
}
