package charttest_test

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/meridian-mesh/meridian/internal/chart"
)

// access is one API call a component's code makes, and where.
type access struct {
	namespaced bool   // in the control plane's namespace (a Role), else cluster-wide
	group      string // API group ("" is core)
	resource   string
	verbs      string // comma-separated
	name       string // the one object it touches, "" for any
	where      string // the code that calls it
}

// uses lists, for each component's ServiceAccount, every call its code makes to the API
// server: the informers' list and watch, and each client call. Keep it next to the code it
// names; the chart's RBAC must grant exactly this. (SelfSubjectAccessReviews, which identity
// creates to check its TokenReview access at start, are allowed to every authenticated user by
// the API server's system:basic-user role, and need no rule.) TestStandIn proves the other
// direction: each component runs under these rules only.
var uses = map[string][]access{
	"linkerd-destination": {
		{false, "", "services", "list,watch", "", "shard/source/kubernetes.go: the Services informer"},
		{false, "discovery.k8s.io", "endpointslices", "list,watch", "", "shard/source/kubernetes.go: the EndpointSlices informer"},
		{false, "", "pods", "list,watch", "", "shard/source/kubernetes.go: the Pods informer"},
		{false, "", "pods", "get", "", "shard/source/pods.go: podShare.read, of a pod a slice the replica keeps starts naming"},
		{false, "", "nodes", "list,watch", "", "shard/source/kubernetes.go: the Nodes informer (metadata only)"},
		{false, "policy.linkerd.io", "servers", "list,watch", "", "shard/source/kubernetes.go: the Servers informer (dynamic)"},
		{false, "linkerd.io", "serviceprofiles", "list,watch", "", "shard/source/profiles_kube.go: the ServiceProfiles informer (metadata only)"},
		{false, "linkerd.io", "serviceprofiles", "get", "", "shard/source/profiles_kube.go: profileFetcher.fetch, of the profiles a replica serves"},
		{true, "apps", "statefulsets", "get", "linkerd-destination", "cmd/meridian/destination.go: statefulSetReplicas, the ring's count at a cold start (--ring-expect-statefulset)"},
	},
	"linkerd-identity": {
		{false, "authentication.k8s.io", "tokenreviews", "create", "", "identity/reviewer_kube.go: KubeReviewer.Review"},
		{true, "", "secrets", "get,watch", "linkerd-identity-issuer", "identity/source_kube.go: KubeSource.Load and Watch"},
		{true, "", "configmaps", "get,watch", "linkerd-identity-trust-roots", "identity/source_kube.go: KubeSource.Load and Watch"},
		{true, "", "events", "create", "", "identity/events.go: KubeEvents.Event (on the Deployment linkerd-identity)"},
	},
	"linkerd-proxy-injector": {
		{false, "", "namespaces", "get", "", "injector/namespaces.go: KubeNamespaces.Namespace, at each admission"},
		{true, "", "configmaps", "get", "linkerd-identity-trust-roots", "injector/component.go: NewServer reads the trust anchors"},
	},
	"linkerd-policy": {
		{false, "", "pods", "list,watch", "", "policy/source_kube.go: the Pods informer"},
		{false, "policy.linkerd.io", "servers", "list,watch", "", "policy/source_kube.go: a dynamic informer per api.Resources"},
		{false, "policy.linkerd.io", "authorizationpolicies", "list,watch", "", "policy/source_kube.go"},
		{false, "policy.linkerd.io", "meshtlsauthentications", "list,watch", "", "policy/source_kube.go"},
		{false, "policy.linkerd.io", "networkauthentications", "list,watch", "", "policy/source_kube.go"},
		{false, "policy.linkerd.io", "serverauthorizations", "list,watch", "", "policy/source_kube.go"},
	},
}

// grants expands accesses into one line per verb.
func grants(as []access) []string {
	var out []string
	for _, a := range as {
		for _, v := range strings.Split(a.verbs, ",") {
			out = append(out, grantLine(a.namespaced, a.group, a.resource, v, a.name))
		}
	}
	sort.Strings(out)
	return out
}

func grantLine(namespaced bool, group, resource, verb, name string) string {
	scope := "cluster"
	if namespaced {
		scope = "namespace"
	}
	if name == "" {
		name = "*"
	}
	return fmt.Sprintf("%s %s/%s %s %s", scope, group, resource, verb, name)
}

// rendered returns, for each ServiceAccount, the grants of the roles bound to it.
func rendered(t *testing.T, ms []chart.Manifest) map[string][]string {
	t.Helper()
	roles := map[string][]rbacv1.PolicyRule{} // "ClusterRole/x" or "Role/x"
	var bindings []struct {
		namespaced bool
		role       rbacv1.RoleRef
		subjects   []rbacv1.Subject
	}
	for _, m := range ms {
		switch m.Kind {
		case "ClusterRole", "Role":
			var r rbacv1.ClusterRole
			if err := yaml.Unmarshal([]byte(m.Content), &r); err != nil {
				t.Fatal(err)
			}
			roles[m.Kind+"/"+m.Name] = r.Rules
		case "ClusterRoleBinding", "RoleBinding":
			var b rbacv1.RoleBinding
			if err := yaml.Unmarshal([]byte(m.Content), &b); err != nil {
				t.Fatal(err)
			}
			bindings = append(bindings, struct {
				namespaced bool
				role       rbacv1.RoleRef
				subjects   []rbacv1.Subject
			}{m.Kind == "RoleBinding", b.RoleRef, b.Subjects})
		}
	}
	out := map[string][]string{}
	for _, b := range bindings {
		rules, ok := roles[b.role.Kind+"/"+b.role.Name]
		if !ok {
			t.Errorf("a binding names %s %s, which the chart does not render", b.role.Kind, b.role.Name)
		}
		for _, s := range b.subjects {
			for _, r := range rules {
				names := r.ResourceNames
				if len(names) == 0 {
					names = []string{""}
				}
				for _, g := range r.APIGroups {
					for _, res := range r.Resources {
						for _, v := range r.Verbs {
							for _, n := range names {
								out[s.Name] = append(out[s.Name], grantLine(b.namespaced, g, res, v, n))
							}
						}
					}
				}
			}
		}
	}
	for sa := range out {
		sort.Strings(out[sa])
	}
	return out
}

// TestRBACIsWhatTheCodeUses compares each ServiceAccount's rendered RBAC with uses: nothing
// missing, nothing more.
func TestRBACIsWhatTheCodeUses(t *testing.T) {
	r, err := chart.Render(chart.Options{Namespace: "linkerd", Base: identityBase(t, "linkerd"), HA: true})
	if err != nil {
		t.Fatal(err)
	}
	got := rendered(t, r.Manifests)
	for sa, as := range uses {
		want := grants(as)
		missing, extra := diff(want, got[sa]), diff(got[sa], want)
		if len(missing) > 0 || len(extra) > 0 {
			t.Errorf("ServiceAccount %s:\n  granted but not used: %v\n  used but not granted: %v", sa, extra, missing)
		}
	}
	for sa := range got {
		if _, ok := uses[sa]; !ok {
			t.Errorf("ServiceAccount %s has RBAC but no component uses it", sa)
		}
	}
	// One ServiceAccount per component.
	seen := map[string]string{}
	for _, o := range decodeAll(t, r.Manifests) {
		if o.GetKind() != "Deployment" && o.GetKind() != "StatefulSet" {
			continue
		}
		sa, _, _ := unstructured.NestedString(o.Object, "spec", "template", "spec", "serviceAccountName")
		if other, dup := seen[sa]; dup || sa == "" {
			t.Errorf("%s %s runs as ServiceAccount %q, as %s does", o.GetKind(), o.GetName(), sa, other)
		}
		seen[sa] = o.GetName()
	}
	if len(seen) != len(uses) {
		t.Errorf("workloads run as %v, want one per component of %d", seen, len(uses))
	}
}

func diff(a, b []string) []string {
	in := map[string]bool{}
	for _, s := range b {
		in[s] = true
	}
	var out []string
	for _, s := range a {
		if !in[s] {
			out = append(out, s)
		}
	}
	return out
}
