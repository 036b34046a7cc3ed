package charttest_test

import (
	"cmp"
	"context"
	"encoding/pem"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"

	"github.com/meridian-mesh/meridian/identity"
	"github.com/meridian-mesh/meridian/internal/chart"
	"github.com/meridian-mesh/meridian/internal/charttest"
)

func TestHelmLint(t *testing.T) {
	f := newFixture(t)
	for _, extra := range [][]string{nil, {"-f", charttest.ChartDir() + "/values-ha.yaml"}} {
		args := append([]string{"lint", "--strict", charttest.ChartDir(), "-f", f.identity}, extra...)
		if out, err := charttest.Helm(t, f.dir, "", args...); err != nil {
			t.Errorf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

func TestSchemaRejects(t *testing.T) {
	f := newFixture(t)
	for _, c := range []struct{ set, want string }{
		{"destination.replicas=three", "at '/destination/replicas': got string, want integer"},
		{"destination.replicas=0", "at '/destination/replicas': minimum: got 0, want 1"},
		{"webhookFailurePolicy=Sometimes", "at '/webhookFailurePolicy'"},
		{"destinaton.replicas=3", "additional properties 'destinaton' not allowed"},
		{"controlPlaneTLS.enabled=false", "at '/controlPlaneTLS/enabled'"},
		{"proxy.command[0]=", "at '/proxy/command/0'"},
		{`proxy.command[0]=meridian\,proxy`, "at '/proxy/command/0'"},
		{"identityTrustDomain=Bad_Domain", "at '/identityTrustDomain'"},
		{"clusterDomain=Cluster.Local", "at '/clusterDomain'"},
		{"destination.shardKey=tenant", "at '/destination/shardKey'"},
	} {
		for _, verb := range []string{"template", "lint"} {
			args := []string{verb, charttest.ChartDir(), "-f", f.identity, "--set", c.set}
			_, err := charttest.Helm(t, f.dir, "", args...)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("helm %s --set %s: %v, want an error with %q", verb, c.set, err, c.want)
			}
		}
	}
}

// identityBase is freshly generated identity values for ns.
func identityBase(t *testing.T, ns string) map[string]any {
	t.Helper()
	g, err := identity.GenerateInstall("cluster.local", ns, 365*24*time.Hour, time.Now(), false)
	if err != nil {
		t.Fatal(err)
	}
	return map[string]any{
		"identityTrustAnchorsPEM": string(g.AnchorsPEM),
		"identity":                map[string]any{"issuer": map[string]any{"tls": map[string]any{"crtPEM": string(g.CertPEM), "keyPEM": string(g.KeyPEM)}}},
	}
}

// TestRenderDryRunApply renders the chart (defaults, and HA with the HPA and NetworkPolicies),
// has the API server dry-run every object (server-side apply), then applies them into a
// fresh namespace, CRDs included: every object must be accepted.
func TestRenderDryRunApply(t *testing.T) {
	for _, c := range []struct {
		name string
		ha   bool
		set  []string
	}{
		{"default", false, nil},
		{"ha", true, []string{"networkPolicy.enabled=true", "networkPolicy.apiServerCIDRs[0]=10.0.0.1/32", "destination.autoscaling.enabled=true"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t)
			r, err := chart.Render(chart.Options{Namespace: f.ns, HA: c.ha, Base: identityBase(t, f.ns), Set: c.set})
			if err != nil {
				t.Fatal(err)
			}
			objs := decodeAll(t, r.All())
			applyAll(t, f, objs, true)
			applyAll(t, f, objs, false)
		})
	}
}

// TestOptionalObjectsRender renders what needs CRDs the test API server lacks (a
// ServiceMonitor, a cert-manager Certificate) and checks their shape.
func TestOptionalObjectsRender(t *testing.T) {
	r, err := chart.Render(chart.Options{Namespace: "linkerd", Base: identityBase(t, "linkerd"), Set: []string{
		"serviceMonitor.enabled=true", "proxyInjector.certManager.enabled=true", "proxyInjector.certManager.issuerRef.name=webhook-issuer",
	}})
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]map[string]any{}
	for _, o := range decodeAll(t, r.All()) {
		kinds[o.GetKind()+"/"+o.GetName()] = o.Object
	}
	if kinds["ServiceMonitor/meridian"] == nil || kinds["Service/meridian-admin"] == nil {
		t.Error("serviceMonitor.enabled renders no ServiceMonitor and admin Service")
	}
	crt := kinds["Certificate/linkerd-proxy-injector"]
	if crt == nil {
		t.Fatal("certManager.enabled renders no Certificate")
	}
	if s, _, _ := unstructured.NestedString(crt, "spec", "secretName"); s != "linkerd-proxy-injector-k8s-tls" {
		t.Errorf("Certificate secretName = %q", s)
	}
	if kinds["Secret/linkerd-proxy-injector-k8s-tls"] != nil {
		t.Error("with cert-manager the chart still renders the webhook's Secret")
	}
	mwc := kinds["MutatingWebhookConfiguration/linkerd-linkerd-proxy-injector"]
	if a, _, _ := unstructured.NestedString(mwc, "metadata", "annotations", "cert-manager.io/inject-ca-from"); a != "linkerd/linkerd-proxy-injector" {
		t.Errorf("inject-ca-from annotation = %q", a)
	}
}

// TestProxyFlagsRender: proxy.command reaches the injector as --proxy-command (the proxy
// built alone by default, `meridian proxy` when an image lacks it), and proxy.initImage as
// --proxy-init-image (by default the chart's image with -proxy-init appended). TestStandIn
// proves the running injector puts them into pods.
func TestProxyFlagsRender(t *testing.T) {
	for _, c := range []struct {
		set  []string
		want []string
	}{
		{nil, []string{"--proxy-command=meridian-proxy", "--proxy-init-image=ghcr.io/meridian-mesh/meridian-proxy-init"}},
		{[]string{"proxy.command={meridian,proxy}", "image.name=registry.example/mesh"},
			[]string{"--proxy-command=meridian,proxy", "--proxy-init-image=registry.example/mesh-proxy-init"}},
		{[]string{"proxy.initImage.name=registry.example/init"}, []string{"--proxy-init-image=registry.example/init"}},
	} {
		r, err := chart.Render(chart.Options{Namespace: "linkerd", Base: identityBase(t, "linkerd"), Set: c.set})
		if err != nil {
			t.Fatal(err)
		}
		args := containerArgs(t, decodeAll(t, r.All()), "Deployment", "linkerd-proxy-injector")
		for _, w := range c.want {
			if !slices.Contains(args, w) {
				t.Errorf("--set %v: the injector's args %q lack %s", c.set, args, w)
			}
		}
	}
	// No command at all (the schema refuses an empty list and a blank element: see
	// TestSchemaRejects) is refused by the template, saying what to set. (helm lint only warns
	// on a required value.)
	_, err := chart.Render(chart.Options{Namespace: "linkerd", Base: identityBase(t, "linkerd"), Set: []string{"proxy.command=null"}})
	if err == nil || !strings.Contains(err.Error(), "proxy.command is empty") {
		t.Errorf("--set proxy.command=null: %v, want an error saying proxy.command is empty", err)
	}
}

// containerArgs is the args of the first container of the workload kind/name in objs.
func containerArgs(t *testing.T, objs []*unstructured.Unstructured, kind, name string) []string {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			cs, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
			args, _, _ := unstructured.NestedStringSlice(cs[0].(map[string]any), "args")
			return args
		}
	}
	t.Fatalf("no %s %s rendered", kind, name)
	return nil
}

// TestNetworkPolicyNeedsAPIServer: networkPolicy.enabled without the API server's addresses
// is refused, saying what to set, with or without adminFrom (with adminFrom alone the
// webhook's rule rendered an empty "from", which admits every source); with them, no
// ingress rule of any policy has an empty "from".
func TestNetworkPolicyNeedsAPIServer(t *testing.T) {
	on := []string{"networkPolicy.enabled=true"}
	for _, set := range [][]string{on, append(on, "networkPolicy.adminFrom[0].podSelector.matchLabels.app=prometheus")} {
		_, err := chart.Render(chart.Options{Namespace: "linkerd", Base: identityBase(t, "linkerd"), Set: set})
		if err == nil || !strings.Contains(err.Error(), "networkPolicy.apiServerCIDRs is empty") {
			t.Errorf("--set %v: %v, want an error saying networkPolicy.apiServerCIDRs is empty", set, err)
		}
	}
	r, err := chart.Render(chart.Options{Namespace: "linkerd", Base: identityBase(t, "linkerd"),
		Set: append(on, "networkPolicy.apiServerCIDRs[0]=10.0.0.1/32")})
	if err != nil {
		t.Fatal(err)
	}
	policies := 0
	for _, o := range decodeAll(t, r.All()) {
		if o.GetKind() != "NetworkPolicy" {
			continue
		}
		policies++
		rules, _, _ := unstructured.NestedSlice(o.Object, "spec", "ingress")
		for i, rule := range rules {
			if from, _, _ := unstructured.NestedSlice(rule.(map[string]any), "from"); len(from) == 0 {
				t.Errorf("NetworkPolicy %s: ingress rule %d has no peers, so it admits every source", o.GetName(), i)
			}
		}
	}
	if policies != 4 {
		t.Errorf("%d NetworkPolicies rendered, want 4", policies)
	}
}

// TestLargeIntegerFromValuesFile: a number from a values file reaches a flag as an integer.
// Helm reads such numbers as floats, and one of a million or more printed as 1e+06, which
// the destination refused at start.
func TestLargeIntegerFromValuesFile(t *testing.T) {
	base := identityBase(t, "linkerd")
	base["destination"] = map[string]any{"streamQueueCapacity": float64(1_000_000)} // as a values file gives it
	r, err := chart.Render(chart.Options{Namespace: "linkerd", Base: base})
	if err != nil {
		t.Fatal(err)
	}
	args := containerArgs(t, decodeAll(t, r.All()), "StatefulSet", "linkerd-destination")
	if !slices.Contains(args, "--stream-queue-capacity=1000000") {
		t.Errorf("the destination's args %q lack --stream-queue-capacity=1000000", args)
	}
}

// TestShardKey: destination.shardKey reaches every replica's --shard-key, service by default.
func TestShardKey(t *testing.T) {
	for _, key := range []string{"", "service", "namespace"} {
		base := identityBase(t, "linkerd")
		if key != "" {
			base["destination"] = map[string]any{"shardKey": key}
		}
		r, err := chart.Render(chart.Options{Namespace: "linkerd", Base: base})
		if err != nil {
			t.Fatal(err)
		}
		want := "--shard-key=" + cmp.Or(key, "service")
		if args := containerArgs(t, decodeAll(t, r.All()), "StatefulSet", "linkerd-destination"); !slices.Contains(args, want) {
			t.Errorf("shardKey %q: the destination's args %q lack %s", key, args, want)
		}
	}
}

// TestColdStartFlags: the destination waits for its ring to form at a cold start
// (destination.coldStartWait), expecting its StatefulSet's replicas, which it reads at start;
// no count is in the pod template, which would restart every replica on each scale.
func TestColdStartFlags(t *testing.T) {
	for _, tc := range []struct {
		name string
		dst  map[string]any
	}{
		{"default, one replica", nil},
		{"three replicas", map[string]any{"replicas": 3}},
		{"autoscaled", map[string]any{"autoscaling": map[string]any{"enabled": true, "minReplicas": 1},
			"resources": map[string]any{"requests": map[string]any{"cpu": "1"}}}},
		{"no wait", map[string]any{"replicas": 3, "coldStartWait": "0s"}},
	} {
		base := identityBase(t, "linkerd")
		if tc.dst != nil {
			base["destination"] = tc.dst
		}
		r, err := chart.Render(chart.Options{Namespace: "linkerd", Base: base})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		args := containerArgs(t, decodeAll(t, r.All()), "StatefulSet", "linkerd-destination")
		wait := "--ring-cold-start-wait=30s"
		if w, ok := tc.dst["coldStartWait"].(string); ok {
			wait = "--ring-cold-start-wait=" + w
		}
		for _, want := range []string{wait, "--ring-expect-statefulset=linkerd-destination"} {
			if !slices.Contains(args, want) {
				t.Errorf("%s: the destination's args %q lack %s", tc.name, args, want)
			}
		}
		for _, a := range args {
			if strings.HasPrefix(a, "--ring-expect-replicas") {
				t.Errorf("%s: a count in the pod template: %s", tc.name, a)
			}
		}
	}
}

// TestImageReferences: an image pinned by digest in image.name is used as it is, and then the
// capture init image must be named too (appending -proxy-init to a digest names nothing); a
// digest in image.tag is refused, saying where it goes; the version label is a valid label
// value whatever the tag holds; proxy.image.pullPolicy (by default image.pullPolicy) reaches
// the injector.
func TestImageReferences(t *testing.T) {
	const digest = "@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	render := func(set ...string) ([]*unstructured.Unstructured, error) {
		r, err := chart.Render(chart.Options{Namespace: "linkerd", Base: identityBase(t, "linkerd"), Set: set})
		if err != nil {
			return nil, err
		}
		return decodeAll(t, r.All()), nil
	}
	for _, c := range []struct {
		set  []string
		want string
	}{
		{[]string{"image.name=registry.example/mesh" + digest}, "set proxy.initImage.name"},
		{[]string{"image.tag=0.1.0" + digest}, "holds a digest"},
	} {
		if _, err := render(c.set...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("--set %v: %v, want an error with %q", c.set, err, c.want)
		}
	}

	objs, err := render("image.name=registry.example/mesh"+digest, "proxy.initImage.name=registry.example/init"+digest,
		"image.tag=1.2.3+build.5", "proxy.image.pullPolicy=Always")
	if err != nil {
		t.Fatal(err)
	}
	args := containerArgs(t, objs, "Deployment", "linkerd-proxy-injector")
	for _, w := range []string{"--proxy-init-image=registry.example/init" + digest, "--image-pull-policy=Always"} {
		if !slices.Contains(args, w) {
			t.Errorf("the injector's args %q lack %s", args, w)
		}
	}
	for _, o := range objs {
		if o.GetKind() == "CustomResourceDefinition" {
			continue // crds/ is not templated
		}
		if v := o.GetLabels()["app.kubernetes.io/version"]; v != "1.2.3_build.5" {
			t.Errorf("%s %s: version label %q, want 1.2.3_build.5", o.GetKind(), o.GetName(), v)
		}
		if o.GetKind() != "Deployment" && o.GetKind() != "StatefulSet" {
			continue
		}
		cs, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		if img, _, _ := unstructured.NestedString(cs[0].(map[string]any), "image"); img != "registry.example/mesh"+digest {
			t.Errorf("%s %s runs %q, want the pinned image", o.GetKind(), o.GetName(), img)
		}
	}

	objs, err = render()
	if err != nil {
		t.Fatal(err)
	}
	if args := containerArgs(t, objs, "Deployment", "linkerd-proxy-injector"); !slices.Contains(args, "--image-pull-policy=IfNotPresent") {
		t.Errorf("by default the injector's args %q lack image.pullPolicy's --image-pull-policy=IfNotPresent", args)
	}
}

// TestTrustAnchorsWithKeyRefused: trust anchors that hold a private key (the anchor's, pasted
// with its certificate) are refused: they would be copied into a ConfigMap and every meshed
// pod's spec.
func TestTrustAnchorsWithKeyRefused(t *testing.T) {
	base := identityBase(t, "linkerd")
	key := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: []byte("key")})
	base["identityTrustAnchorsPEM"] = base["identityTrustAnchorsPEM"].(string) + string(key)
	_, err := chart.Render(chart.Options{Namespace: "linkerd", Base: base})
	if err == nil || !strings.Contains(err.Error(), "identityTrustAnchorsPEM holds a private key") {
		t.Errorf("anchors with a key: %v, want them refused", err)
	}
}

// TestVersionLabelMatchesCheck: chart.VersionLabel, which `meridian check` applies to its own
// version before comparing it with the pods' label, gives what the template writes, for tags
// the label rewrites (or `check` would report a version mismatch on every such install).
func TestVersionLabelMatchesCheck(t *testing.T) {
	for _, tag := range []string{"0.1.0", "1.2.3+build.5", "-rc_", "v1.0é", strings.Repeat("a", 60) + "-" + strings.Repeat("b", 10)} {
		r, err := chart.Render(chart.Options{Namespace: "linkerd", Base: identityBase(t, "linkerd"), Set: []string{"image.tag=" + tag}})
		if err != nil {
			t.Fatal(err)
		}
		want := chart.VersionLabel(tag)
		for _, o := range decodeAll(t, r.All()) {
			if o.GetKind() == "CustomResourceDefinition" {
				continue
			}
			if got := o.GetLabels()["app.kubernetes.io/version"]; got != want {
				t.Errorf("tag %q: %s %s is labelled %q, chart.VersionLabel says %q", tag, o.GetKind(), o.GetName(), got, want)
				break
			}
		}
	}
}

func decodeAll(t *testing.T, ms []chart.Manifest) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	for _, m := range ms {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(m.Content), &u.Object); err != nil {
			t.Fatalf("%s %s/%s: %v", m.Source, m.Kind, m.Name, err)
		}
		out = append(out, u)
	}
	return out
}

// applyAll server-side applies every object (dryRun: All when dry); real cluster-scoped
// objects other than CRDs are deleted when t ends, so that no webhook outlives the test.
func applyAll(t *testing.T, f *fixture, objs []*unstructured.Unstructured, dry bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(f.env.Client.Discovery()))
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			t.Fatalf("%s %s: %v", gvk.Kind, o.GetName(), err)
		}
		ri := f.env.Dynamic.Resource(m.Resource)
		var client interface {
			Patch(context.Context, string, types.PatchType, []byte, metav1.PatchOptions, ...string) (*unstructured.Unstructured, error)
		} = ri
		if ns := o.GetNamespace(); ns != "" {
			if ns != f.ns {
				t.Fatalf("%s %s renders into namespace %s, not the release's %s", gvk.Kind, o.GetName(), ns, f.ns)
			}
			client = ri.Namespace(ns)
		} else if !dry && gvk.Kind != "CustomResourceDefinition" {
			name := o.GetName()
			t.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				if err := ri.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
					t.Errorf("delete %s %s: %v", gvk.Kind, name, err)
				}
			})
		}
		data, err := o.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		opts := metav1.PatchOptions{FieldManager: "charttest", Force: new(bool)}
		*opts.Force = true
		if dry {
			opts.DryRun = []string{metav1.DryRunAll}
		}
		if _, err := client.Patch(ctx, o.GetName(), types.ApplyPatchType, data, opts); err != nil {
			t.Errorf("apply %s %s (dry run %v): %v", gvk.Kind, o.GetName(), dry, err)
		}
	}
}
