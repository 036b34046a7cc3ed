package api

import (
	"errors"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/meridian-mesh/meridian/internal/serverspec"
	"github.com/meridian-mesh/meridian/policy/compute"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

func decode(t testing.TB, doc string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
		t.Fatalf("bad fixture: %v\n%s", err, doc)
	}
	return u
}

// fixture is a manifest with what the CRD schema and Convert must say of it. schemaOK and
// convertOK differ only for semantic rules that Linkerd also enforces outside its schema
// (e.g. which kinds a targetRef may name), and for a value our schema refuses but Linkerd's
// policy controller ignores (a Server's accessPolicy: converted with a warning).
type fixture struct {
	name      string
	doc       string
	schemaOK  bool
	convertOK bool
	errHas    string // a part of Convert's error
	warnHas   string // a part of Convert's one warning; "" when it must give none
}

const (
	seedServer = `
apiVersion: policy.linkerd.io/v1beta3
kind: Server
metadata: {name: web-http, namespace: shop, labels: {team: web}, creationTimestamp: "2026-01-02T03:04:05Z"}
spec:
  podSelector: {matchLabels: {app: web}}
  port: http
  proxyProtocol: HTTP/1
  accessPolicy: deny
`
	seedPolicy = `
apiVersion: policy.linkerd.io/v1alpha1
kind: AuthorizationPolicy
metadata: {name: web-from-gateway, namespace: shop}
spec:
  targetRef: {group: policy.linkerd.io, kind: Server, name: web-http}
  requiredAuthenticationRefs:
  - {kind: ServiceAccount, name: api-gateway}
`
)

var fixtures = []fixture{
	{name: "seed Server", doc: seedServer, schemaOK: true, convertOK: true},
	{name: "seed AuthorizationPolicy", doc: seedPolicy, schemaOK: true, convertOK: true},
	{name: "Server v1beta1", schemaOK: true, convertOK: true, doc: `
apiVersion: policy.linkerd.io/v1beta1
kind: Server
metadata: {name: s, namespace: shop}
spec: {podSelector: {matchExpressions: [{key: app, operator: In, values: [a, b]}]}, port: 8080}`},
	{name: "Server v1beta2 external workloads", schemaOK: true, convertOK: true, doc: `
apiVersion: policy.linkerd.io/v1beta2
kind: Server
metadata: {name: s, namespace: shop}
spec: {externalWorkloadSelector: {matchLabels: {app: vm}}, port: 8080, proxyProtocol: opaque}`},
	{name: "Server without selector", schemaOK: false, convertOK: false, errHas: "exactly one of podSelector", doc: `
apiVersion: policy.linkerd.io/v1beta3
kind: Server
metadata: {name: s, namespace: shop}
spec: {port: 8080}`},
	{name: "Server with both selectors", schemaOK: false, convertOK: false, errHas: "exactly one of podSelector", doc: `
apiVersion: policy.linkerd.io/v1beta3
kind: Server
metadata: {name: s, namespace: shop}
spec: {podSelector: {}, externalWorkloadSelector: {}, port: 8080}`},
	{name: "Server port out of range", schemaOK: false, convertOK: false, errHas: "out of range", doc: `
apiVersion: policy.linkerd.io/v1beta3
kind: Server
metadata: {name: s, namespace: shop}
spec: {podSelector: {}, port: 70000}`},
	{name: "Server port zero", schemaOK: false, convertOK: false, errHas: "out of range", doc: `
apiVersion: policy.linkerd.io/v1beta3
kind: Server
metadata: {name: s, namespace: shop}
spec: {podSelector: {}, port: 0}`},
	{name: "Server port name invalid", schemaOK: false, convertOK: false, errHas: "spec.port", doc: `
apiVersion: policy.linkerd.io/v1beta3
kind: Server
metadata: {name: s, namespace: shop}
spec: {podSelector: {}, port: "Not_A_Name"}`},
	{name: "Server port name all digits", schemaOK: false, convertOK: false, errHas: "spec.port", doc: `
apiVersion: policy.linkerd.io/v1beta3
kind: Server
metadata: {name: s, namespace: shop}
spec: {podSelector: {}, port: "8080"}`},
	{name: "Server port missing", schemaOK: false, convertOK: false, errHas: "spec.port", doc: `
apiVersion: policy.linkerd.io/v1beta3
kind: Server
metadata: {name: s, namespace: shop}
spec: {podSelector: {}}`},
	{name: "Server bad protocol", schemaOK: false, convertOK: false, errHas: "proxyProtocol", doc: `
apiVersion: policy.linkerd.io/v1beta3
kind: Server
metadata: {name: s, namespace: shop}
spec: {podSelector: {}, port: 80, proxyProtocol: HTTP/3}`},
	{name: "Server bad access policy", schemaOK: false, convertOK: true, warnHas: `spec.accessPolicy: invalid default inbound policy "allow": want one of`, doc: `
apiVersion: policy.linkerd.io/v1beta3
kind: Server
metadata: {name: s, namespace: shop}
spec: {podSelector: {}, port: 80, accessPolicy: allow}`},
	{name: "Server bad selector operator", schemaOK: false, convertOK: false, errHas: "podSelector", doc: `
apiVersion: policy.linkerd.io/v1beta3
kind: Server
metadata: {name: s, namespace: shop}
spec: {podSelector: {matchExpressions: [{key: app, operator: Near}]}, port: 80}`},
	{name: "Server without spec", schemaOK: false, convertOK: false, errHas: "spec", doc: `
apiVersion: policy.linkerd.io/v1beta3
kind: Server
metadata: {name: s, namespace: shop}`},
	{name: "AuthorizationPolicy on namespace with MeshTLS and network", schemaOK: true, convertOK: true, doc: `
apiVersion: policy.linkerd.io/v1alpha1
kind: AuthorizationPolicy
metadata: {name: ap, namespace: shop}
spec:
  targetRef: {kind: Namespace, name: shop}
  requiredAuthenticationRefs:
  - {group: policy.linkerd.io, kind: MeshTLSAuthentication, name: ids, namespace: other}
  - {group: policy.linkerd.io, kind: NetworkAuthentication, name: office}`},
	{name: "AuthorizationPolicy on HTTPRoute", schemaOK: true, convertOK: true, doc: `
apiVersion: policy.linkerd.io/v1alpha1
kind: AuthorizationPolicy
metadata: {name: ap, namespace: shop}
spec:
  targetRef: {group: gateway.networking.k8s.io, kind: HTTPRoute, name: r}
  requiredAuthenticationRefs: []`},
	{name: "AuthorizationPolicy without targetRef", schemaOK: false, convertOK: false, errHas: "targetRef", doc: `
apiVersion: policy.linkerd.io/v1alpha1
kind: AuthorizationPolicy
metadata: {name: ap, namespace: shop}
spec: {requiredAuthenticationRefs: []}`},
	{name: "AuthorizationPolicy without requiredAuthenticationRefs", schemaOK: false, convertOK: false, errHas: "requiredAuthenticationRefs", doc: `
apiVersion: policy.linkerd.io/v1alpha1
kind: AuthorizationPolicy
metadata: {name: ap, namespace: shop}
spec: {targetRef: {group: policy.linkerd.io, kind: Server, name: s}}`},
	{name: "AuthorizationPolicy bad kind syntax", schemaOK: false, convertOK: false, errHas: "unsupported", doc: `
apiVersion: policy.linkerd.io/v1alpha1
kind: AuthorizationPolicy
metadata: {name: ap, namespace: shop}
spec: {targetRef: {kind: "9lives", name: s}, requiredAuthenticationRefs: []}`},
	{name: "AuthorizationPolicy targets a Deployment", schemaOK: true, convertOK: false, errHas: "unsupported target", doc: `
apiVersion: policy.linkerd.io/v1alpha1
kind: AuthorizationPolicy
metadata: {name: ap, namespace: shop}
spec: {targetRef: {group: apps, kind: Deployment, name: web}, requiredAuthenticationRefs: []}`},
	{name: "AuthorizationPolicy targets another namespace", schemaOK: true, convertOK: false, errHas: "own namespace", doc: `
apiVersion: policy.linkerd.io/v1alpha1
kind: AuthorizationPolicy
metadata: {name: ap, namespace: shop}
spec: {targetRef: {kind: Namespace, name: bank}, requiredAuthenticationRefs: []}`},
	{name: "AuthorizationPolicy requires a Secret", schemaOK: true, convertOK: false, errHas: "unsupported authentication", doc: `
apiVersion: policy.linkerd.io/v1alpha1
kind: AuthorizationPolicy
metadata: {name: ap, namespace: shop}
spec: {targetRef: {group: policy.linkerd.io, kind: Server, name: s}, requiredAuthenticationRefs: [{kind: Secret, name: x}]}`},
	{name: "MeshTLSAuthentication identities", schemaOK: true, convertOK: true, doc: `
apiVersion: policy.linkerd.io/v1alpha1
kind: MeshTLSAuthentication
metadata: {name: ids, namespace: shop}
spec: {identities: ["*", "*.shop.serviceaccount.identity.linkerd.cluster.local", "web.shop.serviceaccount.identity.linkerd.cluster.local"]}`},
	{name: "MeshTLSAuthentication identityRefs", schemaOK: true, convertOK: true, doc: `
apiVersion: policy.linkerd.io/v1alpha1
kind: MeshTLSAuthentication
metadata: {name: ids, namespace: shop}
spec: {identityRefs: [{kind: ServiceAccount, name: web}, {kind: Namespace, name: bank}]}`},
	{name: "MeshTLSAuthentication bad identity", schemaOK: false, convertOK: false, errHas: "not an identity", doc: `
apiVersion: policy.linkerd.io/v1alpha1
kind: MeshTLSAuthentication
metadata: {name: ids, namespace: shop}
spec: {identities: ["Web_Frontend"]}`},
	{name: "MeshTLSAuthentication both lists", schemaOK: false, convertOK: false, errHas: "exactly one of identities", doc: `
apiVersion: policy.linkerd.io/v1alpha1
kind: MeshTLSAuthentication
metadata: {name: ids, namespace: shop}
spec: {identities: ["*"], identityRefs: [{kind: Namespace, name: bank}]}`},
	{name: "MeshTLSAuthentication ref to a Pod", schemaOK: true, convertOK: false, errHas: "unsupported identity reference", doc: `
apiVersion: policy.linkerd.io/v1alpha1
kind: MeshTLSAuthentication
metadata: {name: ids, namespace: shop}
spec: {identityRefs: [{kind: Pod, name: web-0}]}`},
	{name: "NetworkAuthentication", schemaOK: true, convertOK: true, doc: `
apiVersion: policy.linkerd.io/v1alpha1
kind: NetworkAuthentication
metadata: {name: office, namespace: shop}
spec: {networks: [{cidr: 192.168.0.0/16, except: [192.168.10.0/24, 192.168.20.1]}, {cidr: "fd00::/8"}]}`},
	{name: "NetworkAuthentication bad CIDR", schemaOK: false, convertOK: false, errHas: "not a CIDR", doc: `
apiVersion: policy.linkerd.io/v1alpha1
kind: NetworkAuthentication
metadata: {name: office, namespace: shop}
spec: {networks: [{cidr: 192.168.0.0/33}]}`},
	{name: "NetworkAuthentication bad except", schemaOK: false, convertOK: false, errHas: "except", doc: `
apiVersion: policy.linkerd.io/v1alpha1
kind: NetworkAuthentication
metadata: {name: office, namespace: shop}
spec: {networks: [{cidr: 10.0.0.0/8, except: [office]}]}`},
	{name: "NetworkAuthentication no networks", schemaOK: false, convertOK: false, errHas: "at least one", doc: `
apiVersion: policy.linkerd.io/v1alpha1
kind: NetworkAuthentication
metadata: {name: office, namespace: shop}
spec: {networks: []}`},
	{name: "ServerAuthorization by name, mesh TLS", schemaOK: true, convertOK: true, doc: `
apiVersion: policy.linkerd.io/v1beta1
kind: ServerAuthorization
metadata: {name: saz, namespace: shop}
spec:
  server: {name: web-http}
  client:
    networks: [{cidr: 10.0.0.0/8}]
    meshTLS: {identities: ["*.example"], serviceAccounts: [{name: api-gateway}, {name: cron, namespace: batch}]}`},
	{name: "ServerAuthorization by selector, unauthenticated", schemaOK: true, convertOK: true, doc: `
apiVersion: policy.linkerd.io/v1beta1
kind: ServerAuthorization
metadata: {name: saz, namespace: shop}
spec: {server: {selector: {matchLabels: {team: web}}}, client: {unauthenticated: true}}`},
	{name: "ServerAuthorization name and selector", schemaOK: false, convertOK: false, errHas: "exactly one of name and selector", doc: `
apiVersion: policy.linkerd.io/v1beta1
kind: ServerAuthorization
metadata: {name: saz, namespace: shop}
spec: {server: {name: a, selector: {}}, client: {unauthenticated: true}}`},
	{name: "ServerAuthorization without client authentication", schemaOK: false, convertOK: false, errHas: "one of unauthenticated and meshTLS", doc: `
apiVersion: policy.linkerd.io/v1beta1
kind: ServerAuthorization
metadata: {name: saz, namespace: shop}
spec: {server: {name: a}, client: {networks: [{cidr: 10.0.0.0/8}]}}`},
	{name: "ServerAuthorization mesh TLS authorizing nobody", schemaOK: true, convertOK: false, errHas: "authorizes no clients", doc: `
apiVersion: policy.linkerd.io/v1beta1
kind: ServerAuthorization
metadata: {name: saz, namespace: shop}
spec: {server: {name: a}, client: {meshTLS: {}}}`},
	{name: "bad object name", schemaOK: true, convertOK: false, errHas: "metadata.name", doc: `
apiVersion: policy.linkerd.io/v1alpha1
kind: NetworkAuthentication
metadata: {name: Office, namespace: shop}
spec: {networks: [{cidr: 10.0.0.0/8}]}`},
}

// TestConvertFixtures checks Convert against every fixture, and the CRD schemas (offline,
// with the API server's validation code) against the same fixtures.
func TestConvertFixtures(t *testing.T) {
	vs := validators(t)
	for _, f := range fixtures {
		t.Run(f.name, func(t *testing.T) {
			u := decode(t, f.doc)
			r, err := Convert(u, "default")
			if (err == nil) != f.convertOK {
				t.Errorf("Convert error = %v, want ok=%v", err, f.convertOK)
			}
			if f.warnHas == "" && len(r.Warnings) > 0 || f.warnHas != "" && (len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0], f.warnHas)) {
				t.Errorf("Convert warnings = %q, want one with %q (none when empty)", r.Warnings, f.warnHas)
			}
			if err != nil && f.errHas != "" && !strings.Contains(err.Error(), f.errHas) {
				t.Errorf("Convert error %q does not mention %q", err, f.errHas)
			}
			if f.name == "bad object name" {
				return // the API server checks names outside the schema
			}
			v, err := validatorFor(vs, u.Object)
			if err != nil {
				t.Fatal(err)
			}
			errs := v.validate(decode(t, f.doc).Object)
			if (len(errs) == 0) != f.schemaOK {
				t.Errorf("schema errors = %v, want ok=%v", errs.ToAggregate(), f.schemaOK)
			}
		})
	}
}

func TestConvertValues(t *testing.T) {
	r, err := Convert(decode(t, seedServer), "")
	if err != nil {
		t.Fatal(err)
	}
	srv := r.Value.(*compute.Server)
	if r.Kind != KindServer || r.Key != (compute.Key{Namespace: "shop", Name: "web-http"}) {
		t.Errorf("resource = %v %v", r.Kind, r.Key)
	}
	if srv.Port != (compute.PortRef{Name: "http"}) || srv.Protocol != compute.ProtocolHTTP1 || srv.AccessPolicy != compute.Deny {
		t.Errorf("server = %+v", srv)
	}
	if !srv.Created.Equal(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)) || srv.Labels["team"] != "web" {
		t.Errorf("server meta = %v %v", srv.Created, srv.Labels)
	}
	if !srv.PodSelector.Matches(labels.Set{"app": "web"}) || srv.PodSelector.Matches(labels.Set{"app": "api"}) {
		t.Errorf("selector %v", srv.PodSelector)
	}

	r, err = Convert(decode(t, seedPolicy), "")
	if err != nil {
		t.Fatal(err)
	}
	want := &compute.AuthorizationPolicy{Namespace: "shop", Name: "web-from-gateway", Target: compute.TargetServer, TargetName: "web-http",
		Authentications: []compute.AuthnRef{{Kind: compute.AuthnServiceAccount, Namespace: "shop", Name: "api-gateway"}}}
	if !reflect.DeepEqual(r.Value, want) {
		t.Errorf("policy = %+v, want %+v", r.Value, want)
	}

	r, err = Convert(decode(t, fixtures[findFixture("NetworkAuthentication")].doc), "")
	if err != nil {
		t.Fatal(err)
	}
	wantNet := &compute.NetworkAuthentication{Namespace: "shop", Name: "office", Networks: []compute.NetworkMatch{
		{Net: netip.MustParsePrefix("192.168.0.0/16"), Except: []netip.Prefix{netip.MustParsePrefix("192.168.10.0/24"), netip.MustParsePrefix("192.168.20.1/32")}},
		{Net: netip.MustParsePrefix("fd00::/8")},
	}}
	if !reflect.DeepEqual(r.Value, wantNet) {
		t.Errorf("network = %+v, want %+v", r.Value, wantNet)
	}

	r, err = Convert(decode(t, fixtures[findFixture("ServerAuthorization by name, mesh TLS")].doc), "")
	if err != nil {
		t.Fatal(err)
	}
	saz := r.Value.(*compute.ServerAuthorization)
	if saz.ServerName != "web-http" || !reflect.DeepEqual(saz.ServiceAccounts, []compute.Key{{Namespace: "shop", Name: "api-gateway"}, {Namespace: "batch", Name: "cron"}}) {
		t.Errorf("saz = %+v", saz)
	}
}

// TestSelectorAsLinkerd: a Server's selector is evaluated as Linkerd's policy controller
// evaluates it (k8s/api/src/labels.rs, Expression::matches), including what apimachinery
// refuses but the CRD accepts: refusing such a deny Server would leave its pods on the
// default policy.
func TestSelectorAsLinkerd(t *testing.T) {
	for _, c := range []struct {
		selector string
		match    []labels.Set
		miss     []labels.Set
	}{
		{`{matchExpressions: [{key: app, operator: NotIn, values: []}]}`, []labels.Set{{}, {"app": "web"}}, nil},
		{`{matchExpressions: [{key: app, operator: In, values: []}]}`, nil, []labels.Set{{}, {"app": "web"}}},
		{`{matchExpressions: [{key: "legacy app", operator: DoesNotExist}]}`, []labels.Set{{"app": "web"}}, nil},
		{`{matchExpressions: [{key: "legacy app", operator: Exists}]}`, nil, []labels.Set{{"app": "web"}}},
		{`{matchLabels: {app: web}, matchExpressions: [{key: tier, operator: NotIn, values: [db]}]}`,
			[]labels.Set{{"app": "web"}, {"app": "web", "tier": "front"}}, []labels.Set{{"app": "web", "tier": "db"}, {"app": "api"}}},
		{`{}`, []labels.Set{{}, {"app": "web"}}, nil},
	} {
		doc := "apiVersion: policy.linkerd.io/v1beta3\nkind: Server\nmetadata: {name: lock-all, namespace: shop}\nspec: {podSelector: " + c.selector + ", port: 8080, accessPolicy: deny}"
		r, err := Convert(decode(t, doc), "")
		if err != nil {
			t.Errorf("%s: %v", c.selector, err)
			continue
		}
		sel := r.Value.(*compute.Server).PodSelector
		for _, l := range c.match {
			if !sel.Matches(l) {
				t.Errorf("%s does not select a pod labelled %v", c.selector, l)
			}
		}
		for _, l := range c.miss {
			if sel.Matches(l) {
				t.Errorf("%s selects a pod labelled %v", c.selector, l)
			}
		}
	}
}

func findFixture(name string) int {
	for i, f := range fixtures {
		if f.name == name {
			return i
		}
	}
	panic(name)
}

func TestConvertIgnoresOtherKinds(t *testing.T) {
	for _, doc := range []string{
		"apiVersion: v1\nkind: Service\nmetadata: {name: web}",
		"apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}",
		"apiVersion: policy.linkerd.io/v1alpha1\nkind: HTTPRoute\nmetadata: {name: web}",
	} {
		_, err := Convert(decode(t, doc), "default")
		var ign *ErrIgnored
		if !errors.As(err, &ign) {
			t.Errorf("Convert(%q) = %v, want ErrIgnored", doc, err)
		}
	}
	_, err := Convert(decode(t, "apiVersion: policy.linkerd.io/v1alpha1\nkind: Server\nmetadata: {name: web}\nspec: {}"), "default")
	var ign *ErrIgnored
	if err == nil || errors.As(err, &ign) || !strings.Contains(err.Error(), "not served") {
		t.Errorf("unserved version: %v", err)
	}
}

const podDoc = `
apiVersion: v1
kind: Pod
metadata:
  name: web-0
  labels: {app: web}
  annotations:
    config.linkerd.io/default-inbound-policy: cluster-authenticated
    config.linkerd.io/opaque-ports: "5432,6000-6002"
    config.linkerd.io/proxy-require-identity-inbound-ports: "8443"
spec:
  initContainers:
  - name: linkerd-proxy
    restartPolicy: Always
    ports: [{name: linkerd-admin, containerPort: 4191}]
    livenessProbe: {httpGet: {path: /live, port: 4191}}
    readinessProbe: {httpGet: {path: /ready, port: linkerd-admin}}
  - name: migrate
  containers:
  - name: app
    ports:
    - {name: http, containerPort: 8080}
    - {name: metrics, containerPort: 9090, protocol: TCP}
    - {name: dns, containerPort: 53, protocol: UDP}
    livenessProbe: {httpGet: {path: "/healthz?verbose=1", port: http}}
    readinessProbe: {httpGet: {path: /ready, port: 8080}}
    startupProbe: {httpGet: {path: /healthz, port: 8080}}
  - name: sidecar
    ports: [{name: http, containerPort: 8081}]
    livenessProbe: {tcpSocket: {port: 8081}}
    readinessProbe: {httpGet: {port: metrics}}
`

func TestConvertPod(t *testing.T) {
	r, err := Convert(decode(t, podDoc), "shop")
	if err != nil {
		t.Fatal(err)
	}
	p := r.Value.(*compute.Pod)
	if r.Key != (compute.Key{Namespace: "shop", Name: "web-0"}) || p.Namespace != "shop" {
		t.Errorf("key %v / %q", r.Key, p.Namespace)
	}
	if p.DefaultPolicy == nil || *p.DefaultPolicy != compute.ClusterAuthenticated {
		t.Errorf("default policy %v", p.DefaultPolicy)
	}
	if !p.OpaquePorts.Has(5432) || !p.OpaquePorts.Has(6001) || len(p.OpaquePorts) != 4 || !p.RequireIDPorts.Has(8443) {
		t.Errorf("port sets %v %v", p.OpaquePorts, p.RequireIDPorts)
	}
	wantNames := map[string][]uint32{"http": {8080, 8081}, "metrics": {9090}, "linkerd-admin": {4191}}
	if !reflect.DeepEqual(p.PortNames, wantNames) {
		t.Errorf("port names %v, want %v", p.PortNames, wantNames)
	}
	// metrics is a port of another container, so "sidecar"'s probe on it does not resolve.
	wantProbes := map[uint32][]string{8080: {"/healthz", "/ready"}, 4191: {"/live", "/ready"}}
	if !reflect.DeepEqual(p.Probes, wantProbes) {
		t.Errorf("probes %v, want %v", p.Probes, wantProbes)
	}
}

// TestConvertPodDefaultPolicyTrimmed: the default-inbound-policy annotation is read with
// its surrounding space trimmed, as the injector reads it for the proxy. "deny " used to
// give the proxy deny and the controller's answer the cluster default.
func TestConvertPodDefaultPolicyTrimmed(t *testing.T) {
	r, err := Convert(decode(t, strings.Replace(podDoc, "cluster-authenticated", `" deny "`, 1)), "shop")
	if err != nil {
		t.Fatal(err)
	}
	if p := r.Value.(*compute.Pod); p.DefaultPolicy == nil || *p.DefaultPolicy != compute.Deny {
		t.Fatalf("default policy %v, want deny", p.DefaultPolicy)
	}
}

// TestConvertPodBadAnnotations: annotations that do not parse are reported; the opaque
// ports are ignored, the default policy and the require-identity ports fail closed (deny,
// every port), where the cluster default and no port were wider than the pod meant.
func TestConvertPodBadAnnotations(t *testing.T) {
	doc := strings.NewReplacer("cluster-authenticated", "allow-all", `"5432,6000-6002"`, `"http"`, `"8443"`, `"8443,https"`).Replace(podDoc)
	r, err := Convert(decode(t, doc), "shop")
	if err != nil {
		t.Fatal(err)
	}
	p := r.Value.(*compute.Pod)
	if p.DefaultPolicy == nil || *p.DefaultPolicy != compute.Deny || len(p.OpaquePorts) != 0 || !p.RequireIDAll {
		t.Errorf("invalid annotations: default policy %v, opaque ports %v, every port requires identity %v; want deny, none, true",
			p.DefaultPolicy, p.OpaquePorts, p.RequireIDAll)
	}
	if len(r.Warnings) != 3 || !strings.HasSuffix(r.Warnings[0], "; the pod denies by default") || !strings.HasSuffix(r.Warnings[1], "; ignored") ||
		!strings.HasSuffix(r.Warnings[2], "; every port of the pod requires identity") {
		t.Errorf("warnings %q, want the default policy's, the opaque ports' and the require-identity ports'", r.Warnings)
	}
	if good, _ := Convert(decode(t, podDoc), "shop"); good.Value.(*compute.Pod).RequireIDAll {
		t.Errorf("a valid require-identity list made every port require identity")
	}
}

// maxErrorLen bounds Convert's errors: each quotes at most a short prefix of a bad value
// (internal/quote), so an object with huge strings does not put them in logs and /ready.
const maxErrorLen = 1024

// FuzzConvert feeds arbitrary YAML/JSON manifests to Convert: it must never panic, and what
// it accepts must be internally consistent.
func FuzzConvert(f *testing.F) {
	for _, fx := range fixtures {
		f.Add(fx.doc)
	}
	f.Add(podDoc)
	f.Add(`{"apiVersion":"policy.linkerd.io/v1beta3","kind":"Server","metadata":{"name":"a","namespace":"b"},"spec":{"podSelector":{"matchLabels":{"x":1}},"port":"x"}}`)
	f.Add(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a"},"spec":{"containers":[{"ports":[{"containerPort":-1}]}]}}`)
	f.Fuzz(func(t *testing.T, doc string) {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil || u.Object == nil {
			return
		}
		r, err := Convert(u, "default")
		if err != nil {
			if len(err.Error()) > maxErrorLen {
				t.Fatalf("an error of %d bytes (at most %d): %.300s", len(err.Error()), maxErrorLen, err)
			}
			return
		}
		for _, w := range r.Warnings {
			if len(w) > maxErrorLen {
				t.Fatalf("a warning of %d bytes (at most %d): %.300s", len(w), maxErrorLen, w)
			}
		}
		if r.Value == nil || r.Key.Name == "" || r.Key.Namespace == "" {
			t.Fatalf("accepted without a value or key: %+v", r)
		}
		switch v := r.Value.(type) {
		case *compute.Server:
			if (v.PodSelector == nil) == (v.ExternalWorkloadSelector == nil) {
				t.Fatalf("server with %v / %v selectors", v.PodSelector, v.ExternalWorkloadSelector)
			}
			if (v.Port.Name == "") == (v.Port.Number == 0) || v.Port.Number > 65535 {
				t.Fatalf("server port %+v", v.Port)
			}
		case *compute.NetworkAuthentication:
			for _, n := range v.Networks {
				if !n.Net.IsValid() {
					t.Fatalf("invalid network %v", n)
				}
			}
		case *compute.Pod:
			for port := range v.Probes {
				if port == 0 || port > 65535 {
					t.Fatalf("probe port %d", port)
				}
			}
		}
	})
}

// TestServerValuesAgree checks that the values serverspec.Check accepts for proxyProtocol
// and accessPolicy are those this package converts: the destination and the policy
// controller accept the same Servers.
func TestServerValuesAgree(t *testing.T) {
	var names []string
	for p := compute.DefaultPolicy(0); !strings.HasPrefix(p.String(), "DefaultPolicy("); p++ {
		names = append(names, p.String())
	}
	if !sameSet(names, serverspec.AccessPolicies) {
		t.Errorf("default policies %v, serverspec's access policies %v", names, serverspec.AccessPolicies)
	}
	var protos []string
	for p := range protocols {
		if p != "" {
			protos = append(protos, p)
		}
	}
	if !sameSet(protos, serverspec.Protocols) {
		t.Errorf("protocols %v, serverspec's %v", protos, serverspec.Protocols)
	}
}

func sameSet(a, b []string) bool {
	a, b = slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b))
	return slices.Equal(a, b)
}
