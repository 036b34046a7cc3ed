package source

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/meridian-mesh/meridian/internal/manifest"
	"github.com/meridian-mesh/meridian/internal/manifest/manifesttest"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/meridian-mesh/meridian/translator"
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

// kindErrorCases are problems of the destination's kinds (their strict decoding and their
// validation), each one error placed at its line. What the loader does with any kind
// (documents, Lists, YAML errors, lines) is internal/manifest's and tested there.
var kindErrorCases = []struct {
	name string
	data string
	err  string // a regular expression
}{
	{
		name: "empty name is reported at metadata",
		data: "apiVersion: v1\nkind: Service\nmetadata:\n  namespace: shop\nspec: {ports: [{port: 80}]}\n",
		err:  `^f\.yaml:3: kind Service: metadata\.name: is empty$`,
	},
	{
		name: "missing metadata is reported at the document start",
		data: "# c\n---\napiVersion: v1\nkind: Service\n",
		err:  `^f\.yaml:3: kind Service: metadata\.name: is empty$`,
	},
	{
		name: "bad IPv4 address at its line",
		data: strings.Replace(sliceWeb, `["127.0.10.1"]`, `["127.0.10.1", "10.0.0.300"]`, 1),
		err:  `^f\.yaml:10: kind EndpointSlice shop/web-abc: endpoints\[0\]\.addresses\[1\]: "10\.0\.0\.300" is not an IP address$`,
	},
	{
		name: "IPv4 address in an IPv6 slice",
		data: strings.Replace(sliceWeb, "IPv4", "IPv6", 1),
		err:  `^f\.yaml:10: kind EndpointSlice shop/web-abc: endpoints\[0\]\.addresses\[0\]: "127\.0\.10\.1" is not an IPv6 address`,
	},
	{
		name: "unknown address type",
		data: strings.Replace(sliceWeb, "IPv4", "IPv5", 1),
		err:  `^f\.yaml:7: kind EndpointSlice shop/web-abc: addressType: "IPv5" is not one of`,
	},
	{
		name: "unknown field at its line",
		data: strings.Replace(svcWeb, "    port: 80\n", "    port: 80\n    prot: TCP\n", 1),
		err:  `^f\.yaml:10: kind Service: unknown field "spec\.ports\[0\]\.prot"$`,
	},
	{
		name: "wrong type at its field",
		data: strings.Replace(svcWeb, "port: 80", "port: eighty", 1),
		err:  `^f\.yaml:9: kind Service: json: cannot unmarshal string into Go struct field ServicePort\.spec\.ports\.port of type int32$`,
	},
	{
		name: "wrong type in the second element of a list",
		data: svcWeb + "  - name: b\n    port: \"x\"\n",
		err:  `^f\.yaml:12: kind Service: json: cannot unmarshal string into Go struct field`,
	},
	{
		name: "port out of range",
		data: strings.Replace(svcWeb, "port: 80", "port: 70000", 1),
		err:  `^f\.yaml:9: kind Service shop/web: spec\.ports\[0\]\.port: "70000" is invalid`,
	},
	{
		name: "unsupported apiVersion",
		data: strings.Replace(sliceWeb, "discovery.k8s.io/v1", "discovery.k8s.io/v1beta1", 1),
		err:  `^f\.yaml:1: kind EndpointSlice: apiVersion "discovery\.k8s\.io/v1beta1" is not supported \(want discovery\.k8s\.io/v1\)$`,
	},
	{
		name: "list item error names the item",
		data: "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Pod\n  metadata: {name: ok}\n- apiVersion: v1\n  kind: Pod\n  metadata: {name: Bad_Name}\n",
		err:  `^f\.yaml:9: List items\[1\]: kind Pod default/Bad_Name: metadata\.name: "Bad_Name" is invalid`,
	},
	{
		name: "pod IP that is not an IP address",
		data: "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nstatus: {podIP: not-an-ip}\n",
		err:  `^f\.yaml:4: kind Pod default/x: status\.podIP: "not-an-ip" is not an IP address$`,
	},
	{
		name: "a Node with a namespace",
		data: "apiVersion: v1\nkind: Node\nmetadata: {name: n, namespace: x}\n",
		err:  `^f\.yaml:3: kind Node /n: metadata\.namespace: is "x": a Node has no namespace$`,
	},
	{
		name: "a Server without a selector",
		data: "apiVersion: policy.linkerd.io/v1beta3\nkind: Server\nmetadata: {name: s}\nspec:\n  port: 80\n",
		err:  `^f\.yaml:4: kind Server default/s: spec: exactly one of podSelector and externalWorkloadSelector is required$`,
	},
	{
		name: "a Server whose port is no port",
		data: "apiVersion: policy.linkerd.io/v1beta3\nkind: Server\nmetadata: {name: s}\nspec:\n  podSelector: {matchLabels: {app: web}}\n  port: 0\n",
		err:  `^f\.yaml:6: kind Server default/s: spec\.port: 0 out of range 1-65535$`,
	},
	{
		name: "a Server whose selector does not parse",
		data: "apiVersion: policy.linkerd.io/v1beta2\nkind: Server\nmetadata: {name: s}\nspec:\n  podSelector: {matchExpressions: [{key: app, operator: Bogus}]}\n  port: http\n",
		err:  `^f\.yaml:5: kind Server default/s: spec\.podSelector\.matchExpressions\[0\]\.operator "Bogus": want In, NotIn, Exists or DoesNotExist$`,
	},
	{
		name: "a Server with an unknown field",
		data: "apiVersion: policy.linkerd.io/v1beta3\nkind: Server\nmetadata: {name: s}\nspec:\n  podSelector: {}\n  port: 80\n  proxyProtocl: opaque\n",
		err:  `^f\.yaml:7: kind Server: unknown field "spec\.proxyProtocl"$`,
	},
	{
		name: "pod IP mismatch",
		data: "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nstatus:\n  podIP: 127.0.0.1\n  podIPs: [{ip: 127.0.0.2}]\n",
		err:  `^f\.yaml:6: kind Pod default/a: status\.podIPs\[0\]: "127\.0\.0\.2" differs from status\.podIP "127\.0\.0\.1"$`,
	},
}

func TestDecodeKindErrors(t *testing.T) {
	for _, tc := range kindErrorCases {
		t.Run(tc.name, func(t *testing.T) {
			got := dirDecoder.Decode("f.yaml", []byte(tc.data))
			if len(got.Errors) != 1 || !regexp.MustCompile(tc.err).MatchString(got.Errors[0].Error()) {
				t.Fatalf("errors = %q, want one matching %q", got.Errors, tc.err)
			}
			manifesttest.CheckLocated(t, got.Errors, "f.yaml", []byte(tc.data), manifest.Location)
		})
	}
}

// objectsAre checks the keys and lines of decoded objects ("Kind ns/name@line").
func objectsAre(t *testing.T, got manifest.Result, want ...string) {
	t.Helper()
	keys := make([]string, len(got.Objects))
	for i, o := range got.Objects {
		keys[i] = fmt.Sprintf("%s@%d", o.Key, o.Line)
	}
	if len(got.Errors) > 0 || len(got.Ignored) > 0 || strings.Join(keys, ", ") != strings.Join(want, ", ") {
		t.Fatalf("objects %q, errors %q, %d ignored; want objects %q", keys, got.Errors, len(got.Ignored), want)
	}
}

func TestDecodeDefaults(t *testing.T) {
	objectsAre(t, dirDecoder.Decode("f.yaml", []byte(svcWeb)), "Service shop/web@1")
	objectsAre(t, dirDecoder.Decode("f.yaml", []byte("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n")), "Pod default/p@1") // the namespace defaults to default
	got := dirDecoder.Decode("f.yaml", []byte(svcWeb+"---\n"+sliceWeb+"---\n"+podWeb))
	objectsAre(t, got, "Service shop/web@1", "EndpointSlice shop/web-abc@12", "Pod shop/web-1@24")
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
	es := got.Objects[1].Value.(*translator.EndpointSlice)
	if es.Ports[0].Protocol == nil || *es.Ports[0].Protocol != corev1.ProtocolTCP {
		t.Errorf("slice port protocol not defaulted")
	}
	if len(es.Endpoints) != 1 || es.Endpoints[0].Addr(es).String() != "127.0.10.1" {
		t.Errorf("the ready endpoint lost: %+v", es.Endpoints)
	}
	pod := got.Objects[2].Value.(*translator.Pod)
	if ips := pod.IPs(); len(ips) != 1 || ips[0].String() != "127.0.10.1" {
		t.Errorf("pod addresses %v, want its podIP", ips)
	}

	// Nodes and Servers are delivered as their projections.
	got = dirDecoder.Decode("f.yaml", []byte("apiVersion: v1\nkind: Node\nmetadata: {name: n1, labels: {topology.kubernetes.io/zone: z1, other: x}}\n"+
		"spec: {podCIDR: 10.0.0.0/24}\n---\napiVersion: policy.linkerd.io/v1beta1\nkind: Server\nmetadata: {name: s, namespace: shop}\n"+
		"spec: {podSelector: {matchLabels: {app: web}}, port: http, proxyProtocol: opaque}\n"))
	objectsAre(t, got, "Node /n1@1", "Server shop/s@6")
	if n := got.Objects[0].Value.(*metav1.PartialObjectMetadata); !translator.IsSlimNode(n) || translator.NodeZone(n) != "z1" || n.Namespace != "" {
		t.Errorf("node %+v", n)
	}
	srv := got.Objects[1].Value.(*translator.Server)
	web := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Labels: map[string]string{"app": "web"}}}
	web.Spec.Containers = []corev1.Container{{Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}}}
	if !srv.Selects(translator.SlimPod(web), 8080) || srv.Selects(translator.SlimPod(web), 9090) || srv.ProxyProtocol != "opaque" || srv.Problem != "" {
		t.Errorf("server %+v", srv)
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
		// The slices as written, before the projection drops their not-ready endpoints.
		objs := append(got.Objects, apiSliceDecoder.Decode(f, data).Objects...)
		for _, o := range objs {
			if _, ok := o.Value.(*discoveryv1.EndpointSlice); !ok {
				counts[o.Key.Kind]++
				namespaces[o.Key.Namespace] = true
			}
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
			case *translator.Pod:
				if v.Label("linkerd.io/control-plane-ns") == "linkerd" {
					meshed++
					if v.ServiceAccountName() == "" || len(v.GetOwnerReferences()) == 0 {
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
	manifesttest.Seeds(f, filepath.Join("..", "..", "deploy", "examples"), svcWeb, sliceWeb, podWeb, svcWeb+"---\n"+sliceWeb,
		"apiVersion: v1\nkind: Node\nmetadata: {name: n1, labels: {topology.kubernetes.io/zone: z1}}\n",
		"apiVersion: policy.linkerd.io/v1beta3\nkind: Server\nmetadata: {name: s}\nspec: {podSelector: {matchLabels: {app: web}}, port: http, proxyProtocol: opaque}\n",
		"apiVersion: v1\nkind: List\nitems:\n"+manifesttest.IndentItem(podWeb),
		"a: b: c", "- 1\n- 2", "apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec: {ports: [{port: 0}]}",
		"&a [*a]", "{apiVersion: v1, kind: Pod, metadata: {name: p, labels: {1: 2}}}", "--- !!binary AAAA")
	f.Fuzz(func(t *testing.T, data []byte) {
		got := dirDecoder.Decode("f.yaml", data)
		manifesttest.CheckLocated(t, got.Errors, "f.yaml", data, manifest.Location)
		if len(got.Errors) > 0 {
			return
		}
		for i, o := range got.Objects {
			var problems []fieldError
			switch v := o.Value.(type) {
			case *corev1.Service:
				problems = validateService(v)
			case *translator.Pod, *translator.EndpointSlice:
				problems = apiProblems(data, o.Key)
			case *metav1.PartialObjectMetadata:
				if o.Key.Kind != KindNode || v.Namespace != "" || !translator.IsSlimNode(v) {
					t.Fatalf("%s: a Node that is not a projection: %+v", o.Key, v)
				}
			case *translator.Server:
				if v.Problem != "" {
					t.Fatalf("%s delivered with its problem %s", o.Key, v.Problem)
				}
			default:
				t.Fatalf("object of type %T", o.Value)
			}
			if len(problems) > 0 {
				t.Fatalf("%s delivered with problems %v", o.Key, problems)
			}
			if o.Key.Name == "" || (o.Key.Namespace == "") != (o.Key.Kind == KindNode) {
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

// apiSliceDecoder decodes the EndpointSlices of a manifest as the Dir decoder does, but
// delivers the API objects rather than their projections; apiDecoder does so for
// EndpointSlices and Pods.
var (
	apiSliceDecoder = manifest.NewDecoder(apiSliceKind)
	apiDecoder      = manifest.NewDecoder(apiSliceKind, manifest.Kind{Kind: KindPod, Versions: []string{"v1"}, Decode: decodeAPIPod})
	apiSliceKind    = manifest.Kind{Group: "discovery.k8s.io", Kind: KindEndpointSlice, Versions: []string{"v1"}, Decode: decodeAPIEndpointSlice}
)

// apiProblems returns the validation problems of the API object of the slice or pod key in
// data.
func apiProblems(data []byte, key manifest.Key) []fieldError {
	for _, o := range apiDecoder.Decode("f.yaml", data).Objects {
		if o.Key == key {
			switch v := o.Value.(type) {
			case *discoveryv1.EndpointSlice:
				return validateEndpointSlice(v)
			case *corev1.Pod:
				return validatePod(v)
			}
		}
	}
	return []fieldError{{path: "", msg: "the object is not decoded as an API object"}}
}
