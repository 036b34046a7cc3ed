package source

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/meridian-mesh/meridian/internal/manifest"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

const svcWeb = `apiVersion: v1
kind: Service
metadata:
  name: web
  namespace: shop
spec:
  ports:
  - name: http
    port: 80
    targetPort: http
`

const sliceWeb = `apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: web-abc
  namespace: shop
  labels: {kubernetes.io/service-name: web}
addressType: IPv4
ports: [{name: http, port: 8080}]
endpoints:
- addresses: ["127.0.10.1"]
  conditions: {ready: true}
`

const podWeb = `apiVersion: v1
kind: Pod
metadata: {name: web-1, namespace: shop}
spec:
  containers: [{name: web, ports: [{name: http, containerPort: 8080}]}]
status: {podIP: 127.0.10.1}
`

// keyLines renders decoded objects as "Kind ns/name@line" for comparison.
func keyLines(objs []manifest.Object) []string {
	var out []string
	for _, o := range objs {
		out = append(out, o.Key.String()+"@"+strconv.Itoa(o.Line))
	}
	return out
}

func errStrings(errs []error) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return out
}

func TestDecodeFile(t *testing.T) {
	tests := []struct {
		name    string
		data    string
		objects []string
		ignored int
		errs    []string // regular expressions, one per error, in order
	}{
		{
			name:    "single service",
			data:    svcWeb,
			objects: []string{"Service shop/web@1"},
		},
		{
			name: "namespace defaults to default",
			data: "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n",
			objects: []string{
				"Pod default/p@1",
			},
		},
		{
			name: "empty name is reported at metadata",
			data: "apiVersion: v1\nkind: Service\nmetadata:\n  namespace: shop\nspec: {ports: [{port: 80}]}\n",
			errs: []string{`^f\.yaml:3: kind Service: metadata\.name: is empty$`},
		},
		{
			name: "missing metadata is reported at the document start",
			data: "# c\n---\napiVersion: v1\nkind: Service\n",
			errs: []string{`^f\.yaml:3: kind Service: metadata\.name: is empty$`},
		},
		{
			name: "bad IPv4 address at its line",
			data: strings.Replace(sliceWeb, `["127.0.10.1"]`, `["127.0.10.1", "10.0.0.300"]`, 1),
			errs: []string{`^f\.yaml:10: kind EndpointSlice shop/web-abc: endpoints\[0\]\.addresses\[1\]: "10\.0\.0\.300" is not an IP address$`},
		},
		{
			name: "IPv4 address in an IPv6 slice",
			data: strings.Replace(sliceWeb, "IPv4", "IPv6", 1),
			errs: []string{`^f\.yaml:10: kind EndpointSlice shop/web-abc: endpoints\[0\]\.addresses\[0\]: "127\.0\.10\.1" is not an IPv6 address`},
		},
		{
			name: "unknown address type",
			data: strings.Replace(sliceWeb, "IPv4", "IPv5", 1),
			errs: []string{`^f\.yaml:7: kind EndpointSlice shop/web-abc: addressType: "IPv5" is not one of`},
		},
		{
			name: "unknown field at its line",
			data: strings.Replace(svcWeb, "    port: 80\n", "    port: 80\n    prot: TCP\n", 1),
			errs: []string{`^f\.yaml:10: kind Service: unknown field "spec\.ports\[0\]\.prot"$`},
		},
		{
			name: "wrong type at its field",
			data: strings.Replace(svcWeb, "port: 80", "port: eighty", 1),
			errs: []string{`^f\.yaml:9: kind Service: json: cannot unmarshal string into Go struct field ServicePort\.spec\.ports\.port of type int32$`},
		},
		{
			name: "wrong type in the second element of a list",
			data: svcWeb + "  - name: b\n    port: \"x\"\n",
			errs: []string{`^f\.yaml:12: kind Service: json: cannot unmarshal string into Go struct field`},
		},
		{
			name: "port out of range",
			data: strings.Replace(svcWeb, "port: 80", "port: 70000", 1),
			errs: []string{`^f\.yaml:9: kind Service shop/web: spec\.ports\[0\]\.port: "70000" is invalid`},
		},
		{
			name: "unsupported apiVersion",
			data: strings.Replace(sliceWeb, "discovery.k8s.io/v1", "discovery.k8s.io/v1beta1", 1),
			errs: []string{`^f\.yaml:1: kind EndpointSlice: apiVersion "discovery\.k8s\.io/v1beta1" is not supported \(want discovery\.k8s\.io/v1\)$`},
		},
		{
			name: "list item error names the item",
			data: "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Pod\n  metadata: {name: ok}\n- apiVersion: v1\n  kind: Pod\n  metadata: {name: Bad_Name}\n",
			errs: []string{`^f\.yaml:9: List items\[1\]: kind Pod default/Bad_Name: metadata\.name: "Bad_Name" is invalid`},
		},
		{
			name: "pod IP mismatch",
			data: "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nstatus:\n  podIP: 127.0.0.1\n  podIPs: [{ip: 127.0.0.2}]\n",
			errs: []string{`^f\.yaml:6: kind Pod default/a: status\.podIPs\[0\]: "127\.0\.0\.2" differs from status\.podIP "127\.0\.0\.1"$`},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := dirDecoder.Decode("f.yaml", []byte(tc.data))
			gotErrs := errStrings(got.Errors)
			if len(gotErrs) != len(tc.errs) {
				t.Fatalf("errors = %q, want %d matching %q", gotErrs, len(tc.errs), tc.errs)
			}
			for i, re := range tc.errs {
				if !regexp.MustCompile(re).MatchString(gotErrs[i]) {
					t.Errorf("error %d = %q, want match for %q", i, gotErrs[i], re)
				}
				var fe *FileError
				if !errors.As(got.Errors[i], &fe) || fe.File != "f.yaml" || fe.Line < 1 {
					t.Errorf("error %d is %#v, want a *FileError with file and line", i, got.Errors[i])
				}
			}
			if len(tc.errs) > 0 {
				return
			}
			if g, w := strings.Join(keyLines(got.Objects), ", "), strings.Join(tc.objects, ", "); g != w {
				t.Errorf("objects = %s, want %s", g, w)
			}
			if len(got.Ignored) != tc.ignored {
				t.Errorf("ignored %d documents, want %d", len(got.Ignored), tc.ignored)
			}
		})
	}
}

func indentItem(doc string) string {
	lines := strings.Split(strings.TrimSuffix(doc, "\n"), "\n")
	for i, l := range lines {
		if i == 0 {
			lines[i] = "- " + l
		} else {
			lines[i] = "  " + l
		}
	}
	return strings.Join(lines, "\n") + "\n"
}

func TestDecodeDefaults(t *testing.T) {
	got := dirDecoder.Decode("f.yaml", []byte(svcWeb+"---\n"+sliceWeb+"---\n"+podWeb))
	if len(got.Errors) > 0 || len(got.Objects) != 3 {
		t.Fatalf("decode: %v, %d objects", got.Errors, len(got.Objects))
	}
	svc := got.Objects[0].Value.(*corev1.Service)
	if svc.Kind != "" || svc.APIVersion != "" {
		t.Errorf("TypeMeta kept: %+v; want it empty like informer objects", svc.TypeMeta)
	}
	if svc.Spec.Type != corev1.ServiceTypeClusterIP || svc.Spec.Ports[0].Protocol != corev1.ProtocolTCP {
		t.Errorf("service defaults not applied: %+v", svc.Spec)
	}
	if svc.Spec.Ports[0].TargetPort != intstr.FromString("http") {
		t.Errorf("named targetPort = %v", svc.Spec.Ports[0].TargetPort)
	}
	es := got.Objects[1].Value.(*discoveryv1.EndpointSlice)
	if es.Ports[0].Protocol == nil || *es.Ports[0].Protocol != corev1.ProtocolTCP {
		t.Errorf("slice port protocol not defaulted")
	}
	if es.Endpoints[0].Conditions.Ready == nil || !*es.Endpoints[0].Conditions.Ready {
		t.Errorf("ready condition lost")
	}
	pod := got.Objects[2].Value.(*corev1.Pod)
	if len(pod.Status.PodIPs) != 1 || pod.Status.PodIPs[0].IP != "127.0.10.1" {
		t.Errorf("podIPs not defaulted from podIP: %+v", pod.Status.PodIPs)
	}

	// A port without targetPort gets targetPort = port, as the API server does.
	got = dirDecoder.Decode("f.yaml", []byte("apiVersion: v1\nkind: Service\nmetadata: {name: s}\nspec: {ports: [{port: 8080}]}\n"))
	if p := got.Objects[0].Value.(*corev1.Service).Spec.Ports[0]; p.TargetPort != intstr.FromInt32(8080) {
		t.Errorf("targetPort = %v, want 8080", p.TargetPort)
	}
}

// TestExamples checks that the example cluster decodes cleanly and holds what its comments
// promise.
func TestExamples(t *testing.T) {
	dir := filepath.Join("..", "..", "deploy", "examples")
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no example files in %s: %v", dir, err)
	}
	counts := map[string]int{}
	namespaces := map[string]bool{}
	ipv6, headless, notReady, meshed := 0, 0, 0, 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		got := dirDecoder.Decode(f, data)
		if len(got.Errors) > 0 {
			t.Fatalf("%s: %v", f, got.Errors)
		}
		for _, o := range got.Objects {
			counts[o.Key.Kind]++
			namespaces[o.Key.Namespace] = true
			switch v := o.Value.(type) {
			case *discoveryv1.EndpointSlice:
				if v.AddressType == discoveryv1.AddressTypeIPv6 {
					ipv6++
				}
				for _, ep := range v.Endpoints {
					if ep.Conditions.Ready != nil && !*ep.Conditions.Ready {
						notReady++
					}
				}
			case *corev1.Service:
				if v.Spec.ClusterIP == corev1.ClusterIPNone {
					headless++
				}
			case *corev1.Pod:
				if v.Labels["linkerd.io/control-plane-ns"] == "linkerd" {
					meshed++
					if v.Spec.ServiceAccountName == "" || len(v.OwnerReferences) == 0 {
						t.Errorf("meshed pod %s lacks a service account or owner", o.Key)
					}
				}
			}
		}
	}
	if len(namespaces) != 3 || counts[KindPod] < 8 || counts[KindService] < 5 || ipv6 != 1 || headless != 1 || notReady < 2 || meshed == 0 || meshed == counts[KindPod] {
		t.Errorf("examples: kinds %v, namespaces %v, ipv6 slices %d, headless %d, not-ready endpoints %d, meshed pods %d",
			counts, namespaces, ipv6, headless, notReady, meshed)
	}
}

func FuzzDirParse(f *testing.F) {
	for _, s := range []string{svcWeb, sliceWeb, podWeb, svcWeb + "---\n" + sliceWeb,
		"apiVersion: v1\nkind: List\nitems:\n" + indentItem(podWeb),
		"a: b: c", "- 1\n- 2", "apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec: {ports: [{port: 0}]}",
		"&a [*a]", "{apiVersion: v1, kind: Pod, metadata: {name: p, labels: {1: 2}}}", "--- !!binary AAAA"} {
		f.Add([]byte(s))
	}
	files, _ := filepath.Glob(filepath.Join("..", "..", "deploy", "examples", "*.yaml"))
	for _, p := range files {
		if data, err := os.ReadFile(p); err == nil {
			f.Add(data)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got := dirDecoder.Decode("f.yaml", data)
		lines := strings.Count(string(data), "\n") + 1
		for _, e := range got.Errors {
			var fe *FileError
			if !errors.As(e, &fe) || fe.File != "f.yaml" || fe.Line < 1 || fe.Line > lines {
				t.Fatalf("error without a location in the file (%d lines): %#v", lines, e)
			}
		}
		if len(got.Errors) > 0 {
			return
		}
		for i, o := range got.Objects {
			var problems []fieldError
			switch v := o.Value.(type) {
			case *corev1.Service:
				problems = validateService(v)
			case *corev1.Pod:
				problems = validatePod(v)
			case *discoveryv1.EndpointSlice:
				problems = validateEndpointSlice(v)
			default:
				t.Fatalf("object of type %T", o.Value)
			}
			if len(problems) > 0 {
				t.Fatalf("%s delivered with problems %v", o.Key, problems)
			}
			if o.Key.Name == "" || o.Key.Namespace == "" {
				t.Fatalf("object with an empty key: %v", o.Key)
			}
			if _, err := json.Marshal(o.Value); err != nil {
				t.Fatalf("%s: delivered object does not encode: %v", o.Key, err)
			}
			if again := dirDecoder.Decode("f.yaml", data); again.Objects[i].Hash != o.Hash {
				t.Fatalf("%s: the hash differs between two decodes", o.Key)
			}
		}
	})
}
