package chart

import (
	"bytes"
	"encoding/base64"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// identityValues are syntactically complete identity values; the chart copies them into the
// issuer Secret and trust roots ConfigMap without parsing them.
var identityValues = map[string]any{
	"identityTrustAnchorsPEM": "-----BEGIN CERTIFICATE-----\nanchor\n-----END CERTIFICATE-----\n",
	"identity": map[string]any{"issuer": map[string]any{"tls": map[string]any{
		"crtPEM": "-----BEGIN CERTIFICATE-----\nissuer\n-----END CERTIFICATE-----\n",
		"keyPEM": "-----BEGIN EC PRIVATE KEY-----\nkey\n-----END EC PRIVATE KEY-----\n",
	}}},
}

func find(t *testing.T, r *Rendered, kind, name string) map[string]any {
	t.Helper()
	for _, m := range r.All() {
		if m.Kind == kind && m.Name == name {
			obj := map[string]any{}
			if err := yaml.Unmarshal([]byte(m.Content), &obj); err != nil {
				t.Fatalf("%s/%s: %v", kind, name, err)
			}
			return obj
		}
	}
	t.Fatalf("no %s %s rendered", kind, name)
	return nil
}

func replicas(t *testing.T, r *Rendered, kind, name string) float64 {
	t.Helper()
	n, _ := find(t, r, kind, name)["spec"].(map[string]any)["replicas"].(float64)
	return n
}

func TestRenderDefaultsAndHA(t *testing.T) {
	r, err := Render(Options{Namespace: "mesh", Base: identityValues})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.CRDs) != 6 {
		t.Fatalf("got %d CRDs, want the 5 policy.linkerd.io kinds and linkerd.io's ServiceProfile", len(r.CRDs))
	}
	if got := replicas(t, r, "StatefulSet", "linkerd-destination"); got != 1 {
		t.Fatalf("default destination replicas = %v, want 1", got)
	}
	out := string(r.YAML())
	if !strings.HasPrefix(out, "---\n# Source: crds/") {
		t.Fatalf("output does not start with the CRDs: %.80q", out)
	}
	if strings.Index(out, "kind: ServiceAccount") > strings.Index(out, "kind: Deployment") {
		t.Fatal("ServiceAccounts come after Deployments: not Helm's install order")
	}
	for _, svc := range []string{"linkerd-dst", "linkerd-dst-headless", "linkerd-identity", "linkerd-identity-headless", "linkerd-policy", "linkerd-proxy-injector"} {
		if ns := find(t, r, "Service", svc)["metadata"].(map[string]any)["namespace"]; ns != "mesh" {
			t.Errorf("Service %s in namespace %v, want mesh", svc, ns)
		}
	}
	mwc := find(t, r, "MutatingWebhookConfiguration", "linkerd-mesh-proxy-injector")
	if fp := mwc["webhooks"].([]any)[0].(map[string]any)["failurePolicy"]; fp != "Ignore" {
		t.Errorf("default failurePolicy = %v, want Ignore", fp)
	}

	ha, err := Render(Options{Namespace: "mesh", Base: identityValues, HA: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := replicas(t, ha, "StatefulSet", "linkerd-destination"); got != 3 {
		t.Fatalf("HA destination replicas = %v, want 3", got)
	}
	for _, d := range []string{"linkerd-identity", "linkerd-proxy-injector", "linkerd-policy"} {
		if got := replicas(t, ha, "Deployment", d); got < 2 {
			t.Errorf("HA %s replicas = %v, want 2 or more", d, got)
		}
		find(t, ha, "PodDisruptionBudget", d)
	}
	mwc = find(t, ha, "MutatingWebhookConfiguration", "linkerd-mesh-proxy-injector")
	if fp := mwc["webhooks"].([]any)[0].(map[string]any)["failurePolicy"]; fp != "Fail" {
		t.Errorf("HA failurePolicy = %v, want Fail", fp)
	}
}

func TestValuesOrder(t *testing.T) {
	dir := t.TempDir()
	f1, f2 := filepath.Join(dir, "1.yaml"), filepath.Join(dir, "2.yaml")
	if err := os.WriteFile(f1, []byte("destination:\n  replicas: 4\n  nonOwner: redirect\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f2, []byte("destination:\n  replicas: 6\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := Render(Options{Base: identityValues, HA: true, ValueFiles: []string{f1, f2}, Set: []string{"identity.replicas=5"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := replicas(t, r, "StatefulSet", "linkerd-destination"); got != 6 {
		t.Errorf("destination replicas = %v, want 6 (the later file wins over the earlier one and HA)", got)
	}
	if got := replicas(t, r, "Deployment", "linkerd-identity"); got != 5 {
		t.Errorf("identity replicas = %v, want 5 (--set wins)", got)
	}
	if r.Values["destination"].(map[string]any)["nonOwner"] != "redirect" {
		t.Errorf("nonOwner from the first file lost: %v", r.Values["destination"])
	}
	if identityValues["identity"].(map[string]any)["replicas"] != nil {
		t.Fatal("Render modified Options.Base")
	}
}

func TestRenderErrors(t *testing.T) {
	for _, c := range []struct {
		name string
		o    Options
		want string
	}{
		{"no identity", Options{}, "identityTrustAnchorsPEM is empty"},
		{"wrong type", Options{Base: identityValues, Set: []string{"destination.replicas=three"}}, "at '/destination/replicas': got string, want integer"},
		{"unknown key", Options{Base: identityValues, Set: []string{"destinaton.replicas=3"}}, "additional properties 'destinaton' not allowed"},
		{"bad gossip key", Options{Base: identityValues, Set: []string{"destination.gossipKey.value=abcd"}}, "must be base64 of 16, 24 or 32 bytes"},
		{"bad set", Options{Base: identityValues, Set: []string{"a.b"}}, `--set "a.b"`},
		{"missing file", Options{Base: identityValues, ValueFiles: []string{"/nonexistent/v.yaml"}}, "/nonexistent/v.yaml"},
		{"renewal longer than validity", Options{Base: identityValues, Set: []string{"proxyInjector.certValidityDays=30,proxyInjector.certRenewDays=60"}},
			"proxyInjector.certRenewDays (60) must be less than certValidityDays (30)"},
		{"autoscaling without a CPU request", Options{Base: identityValues, Set: []string{"destination.autoscaling.enabled=true"}},
			"destination.autoscaling.enabled needs destination.resources.requests.cpu"},
		{"two default policies", Options{Base: identityValues, Set: []string{"policy.defaultAllowPolicy=all-unauthenticated,proxy.defaultInboundPolicy=deny"}},
			"policy.defaultAllowPolicy (all-unauthenticated) differs from proxy.defaultInboundPolicy (deny)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Render(c.o)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want it to contain %q", err, c.want)
			}
		})
	}
}

func TestGossipKeyValues(t *testing.T) {
	key := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 24))
	r, err := Render(Options{Base: identityValues, Set: []string{"destination.gossipKey.value=" + key}})
	if err != nil {
		t.Fatal(err)
	}
	data := find(t, r, "Secret", "linkerd-dst-gossip-key")["data"].(map[string]any)["gossip.key"].(string)
	if got, _ := base64.StdEncoding.DecodeString(data); string(got) != key {
		t.Fatalf("gossip.key = %q, want the given key %q", got, key)
	}
	r, err = Render(Options{Base: identityValues, Set: []string{"destination.gossipKey.existingSecret=mine"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range r.Manifests {
		if m.Kind == "Secret" && m.Name == "linkerd-dst-gossip-key" {
			t.Fatal("with existingSecret the chart still renders its gossip key Secret")
		}
	}
	if !strings.Contains(string(r.YAML()), "secretName: mine") {
		t.Fatal("the destination does not mount the existing Secret")
	}
	// A generated key is 32 random bytes, base64, different at each install.
	a, _ := Render(Options{Base: identityValues})
	b, _ := Render(Options{Base: identityValues})
	ka := find(t, a, "Secret", "linkerd-dst-gossip-key")["data"].(map[string]any)["gossip.key"].(string)
	kb := find(t, b, "Secret", "linkerd-dst-gossip-key")["data"].(map[string]any)["gossip.key"].(string)
	raw, _ := base64.StdEncoding.DecodeString(ka)
	if dec, err := base64.StdEncoding.DecodeString(string(raw)); err != nil || len(dec) != 32 || ka == kb {
		t.Fatalf("generated gossip keys %q and %q: want base64 of 32 random bytes each", ka, kb)
	}
}

func TestGoMemLimit(t *testing.T) {
	for _, c := range []struct{ limit, want string }{
		{"512Mi", "483183820"}, {"1Gi", "966367641"}, {"1G", "900000000"}, {"1.5Gi", "1449551462"}, {"1000000", "900000"},
	} {
		r, err := Render(Options{Base: identityValues, Set: []string{"policy.resources.limits.memory=" + c.limit}})
		if err != nil {
			t.Fatal(err)
		}
		out := find(t, r, "Deployment", "linkerd-policy")
		env := out["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)["env"].([]any)
		got := ""
		for _, e := range env {
			if e.(map[string]any)["name"] == "GOMEMLIMIT" {
				got = e.(map[string]any)["value"].(string)
			}
		}
		if got != c.want {
			t.Errorf("limit %s: GOMEMLIMIT = %q, want %s (90%%)", c.limit, got, c.want)
		}
	}
	// In a values file a plain number is a float to Helm, and 1e9 a quantity with an exponent.
	for _, c := range []struct{ yaml, want string }{{"1073741824", "966367641"}, {`"1e9"`, "900000000"}} {
		f := filepath.Join(t.TempDir(), "v.yaml")
		if err := os.WriteFile(f, []byte("policy:\n  resources:\n    limits:\n      memory: "+c.yaml+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		r, err := Render(Options{Base: identityValues, ValueFiles: []string{f}})
		if err != nil {
			t.Fatalf("memory %s in a values file: %v", c.yaml, err)
		}
		if got := containerEnv(t, r, "Deployment", "linkerd-policy", "GOMEMLIMIT"); got != c.want {
			t.Errorf("memory %s in a values file: GOMEMLIMIT = %q, want %s", c.yaml, got, c.want)
		}
	}
	if _, err := Render(Options{Base: identityValues, Set: []string{"policy.resources.limits.memory=lots"}}); err == nil || !strings.Contains(err.Error(), `memory limit "lots"`) {
		t.Errorf("a bad memory limit: %v", err)
	}
}

// containerEnv returns the value of the environment variable name of the first container of
// the workload kind/name.
func containerEnv(t *testing.T, r *Rendered, kind, name, env string) string {
	t.Helper()
	for _, e := range firstContainer(t, r, kind, name)["env"].([]any) {
		if e.(map[string]any)["name"] == env {
			v, _ := e.(map[string]any)["value"].(string)
			return v
		}
	}
	return ""
}

func firstContainer(t *testing.T, r *Rendered, kind, name string) map[string]any {
	t.Helper()
	return find(t, r, kind, name)["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
}

// TestAutoscaling: with autoscaling on, the StatefulSet still names a count (minReplicas on a
// first install; the current count on an upgrade, charttest checks), and the autoscaler
// removes replicas one at a time.
func TestAutoscaling(t *testing.T) {
	r, err := Render(Options{Base: identityValues, Set: []string{
		"destination.autoscaling.enabled=true,destination.autoscaling.minReplicas=4,destination.resources.requests.cpu=100m"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := replicas(t, r, "StatefulSet", "linkerd-destination"); got != 4 {
		t.Fatalf("autoscaled destination replicas = %v, want minReplicas (4)", got)
	}
	hpa := find(t, r, "HorizontalPodAutoscaler", "linkerd-destination")
	down, _ := hpa["spec"].(map[string]any)["behavior"].(map[string]any)["scaleDown"].(map[string]any)
	policies, _ := down["policies"].([]any)
	if len(policies) != 1 || policies[0].(map[string]any)["value"] != float64(1) {
		t.Fatalf("scaleDown = %v, want one pod at a time", down)
	}
}

// TestDefaultInboundPolicy: proxy.defaultInboundPolicy is the policy controller's cluster
// default and the proxies' (through the injector), as in Linkerd's chart.
func TestDefaultInboundPolicy(t *testing.T) {
	r, err := Render(Options{Base: identityValues, Set: []string{"proxy.defaultInboundPolicy=deny"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ kind, name, flag string }{
		{"Deployment", "linkerd-policy", "--cluster-default-policy=deny"},
		{"Deployment", "linkerd-proxy-injector", "--default-inbound-policy=deny"},
	} {
		args := firstContainer(t, r, c.kind, c.name)["args"].([]any)
		if !slices.Contains(args, any(c.flag)) {
			t.Errorf("%s %s args %v lack %s", c.kind, c.name, args, c.flag)
		}
	}
}
