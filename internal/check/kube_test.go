package check

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	"github.com/meridian-mesh/meridian/internal/kubetest"
	"github.com/meridian-mesh/meridian/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.Main(m, kubetest.Main)) }

// fakeFetcher answers /ring and /metrics from per-pod views, or an error.
type fakeFetcher struct {
	views map[string]*ringView
	errs  map[string]error
}

func (f *fakeFetcher) Fetch(_ context.Context, pod *corev1.Pod, port int, path string) ([]byte, error) {
	if port != 9996 {
		return nil, fmt.Errorf("port %d, want the pod's admin-http port 9996", port)
	}
	if err := f.errs[pod.Name]; err != nil {
		return nil, err
	}
	v := f.views[pod.Name]
	if v == nil {
		return nil, errors.New("no view")
	}
	if path == "/metrics" {
		return []byte(fmt.Sprintf("destination_owned_services %d\n", v.owned)), nil
	}
	return json.Marshal(v)
}

// view is a replica's /ring: members with their service counts, name -> services.
func view(self, id string, owned int, members ...any) *ringView {
	v := &ringView{Self: self, ID: id, owned: owned}
	for i := 0; i < len(members); i += 2 {
		n := members[i+1].(int)
		v.Members = append(v.Members, struct {
			Name     string `json:"name"`
			Services int    `json:"services"`
		}{members[i].(string), n})
		v.Services += n
	}
	return v
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// controlPlane creates the chart's four workloads in ns with ready pods (the destination's
// ready unless listed in notReady), every pod labelled with version.
func controlPlane(t *testing.T, env *kubetest.Env, ns, version string, notReady ...string) {
	t.Helper()
	ctx := ctxT(t)
	for _, c := range components {
		sel := map[string]string{"linkerd.io/control-plane-component": c.name}
		tpl := corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: sel},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: c.name, Image: "x", Ports: []corev1.ContainerPort{{Name: "admin-http", ContainerPort: int32(c.adminPort)}}}}},
		}
		n := 1
		var err error
		if c.kind == "StatefulSet" {
			n = 3
			_, err = env.Client.AppsV1().StatefulSets(ns).Create(ctx, &appsv1.StatefulSet{
				ObjectMeta: metav1.ObjectMeta{Name: c.workload},
				Spec:       appsv1.StatefulSetSpec{Replicas: ptr.To(int32(n)), Selector: &metav1.LabelSelector{MatchLabels: sel}, Template: tpl},
			}, metav1.CreateOptions{})
		} else {
			_, err = env.Client.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
				ObjectMeta: metav1.ObjectMeta{Name: c.workload},
				Spec:       appsv1.DeploymentSpec{Replicas: ptr.To(int32(n)), Selector: &metav1.LabelSelector{MatchLabels: sel}, Template: tpl},
			}, metav1.CreateOptions{})
		}
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < n; i++ {
			name := fmt.Sprintf("%s-%d", c.workload, i)
			labels := map[string]string{versionLabel: version}
			for k, v := range sel {
				labels[k] = v
			}
			p, err := env.Client.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: tpl.Spec}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			st := corev1.ConditionTrue
			for _, nr := range notReady {
				if nr == name {
					st = corev1.ConditionFalse
				}
			}
			p.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: fmt.Sprintf("10.1.0.%d", i+1),
				Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: st, Reason: "ProbeFailed"}}}
			if _, err := env.Client.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func results(rep Report) map[string]Result {
	out := map[string]Result{}
	for _, r := range rep.Results {
		out[r.Name] = r
	}
	return out
}

const (
	podsCheck    = "the control-plane pods are ready"
	ringCheck    = "the destination replicas agree on one ring, and every service has one owner"
	versionCheck = "the CLI and the control plane have the same version"
)

func TestNothingInstalled(t *testing.T) {
	env := kubetest.Start(t)
	rep := Run(ctxT(t), Config{Namespace: "no-such-namespace", CLIVersion: "v1"}, Deps{Kube: env.Client, Dynamic: env.Dynamic})
	if rep.OK {
		t.Fatal("check passed without a control plane")
	}
	r := rep.Results
	if !r[0].OK || r[1].OK || !strings.Contains(r[1].Message, "namespace no-such-namespace not found") || !strings.Contains(r[1].Hint, "helm install") {
		t.Fatalf("first results: %+v %+v", r[0], r[1])
	}
	for _, res := range r[2:] {
		if !res.Skipped {
			t.Errorf("%s ran after the namespace check failed: %+v", res.Name, res)
		}
	}
}

func TestPodsRingAndVersion(t *testing.T) {
	env := kubetest.Start(t)
	good := func() map[string]*ringView {
		return map[string]*ringView{
			"linkerd-destination-0": view("linkerd-destination-0", "r1", 4, "linkerd-destination-0", 4, "linkerd-destination-1", 3, "linkerd-destination-2", 3),
			"linkerd-destination-1": view("linkerd-destination-1", "r1", 3, "linkerd-destination-0", 4, "linkerd-destination-1", 3, "linkerd-destination-2", 3),
			"linkerd-destination-2": view("linkerd-destination-2", "r1", 3, "linkerd-destination-0", 4, "linkerd-destination-1", 3, "linkerd-destination-2", 3),
		}
	}
	for _, c := range []struct {
		name     string
		notReady []string
		change   func(map[string]*ringView, map[string]error)
		cli      string
		want     map[string]string // failed check -> text in its message or details
	}{
		{name: "healthy", cli: "v1"},
		{name: "other CLI version", cli: "v2", want: map[string]string{versionCheck: "v1: linkerd-destination-0, linkerd-destination-1"}},
		{name: "a replica not ready", cli: "v1", notReady: []string{"linkerd-destination-2"},
			want: map[string]string{podsCheck: "linkerd-destination: 2 of 3 pods ready; linkerd-destination-2 is not ready (ProbeFailed)"}},
		{name: "a replica sees two members", cli: "v1", change: func(v map[string]*ringView, _ map[string]error) {
			v["linkerd-destination-1"] = view("linkerd-destination-1", "r2", 5, "linkerd-destination-0", 5, "linkerd-destination-1", 5)
		}, want: map[string]string{ringCheck: "linkerd-destination-1 sees 2 members [linkerd-destination-0 linkerd-destination-1], the StatefulSet wants 3"}},
		{name: "a replica holds other services than its share", cli: "v1", change: func(v map[string]*ringView, _ map[string]error) {
			v["linkerd-destination-0"].owned = 5
		}, want: map[string]string{ringCheck: "linkerd-destination-0 holds 5 services, its ring gives it 4"}},
		{name: "rings differ", cli: "v1", change: func(v map[string]*ringView, _ map[string]error) {
			v["linkerd-destination-2"].ID = "r9"
		}, want: map[string]string{ringCheck: "linkerd-destination-2 sees ring r9 over 10 services, linkerd-destination-0 sees ring r1 over 10"}},
		{name: "a replica does not answer", cli: "v1", change: func(_ map[string]*ringView, e map[string]error) {
			e["linkerd-destination-2"] = errors.New("connection refused")
		}, want: map[string]string{ringCheck: "linkerd-destination-2: /ring: connection refused"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ns := env.Namespace(t, nil)
			controlPlane(t, env, ns, "v1", c.notReady...)
			f := &fakeFetcher{views: good(), errs: map[string]error{}}
			if c.change != nil {
				c.change(f.views, f.errs)
			}
			rep := Run(ctxT(t), Config{Namespace: ns, CLIVersion: c.cli}, Deps{Kube: env.Client, Dynamic: env.Dynamic, Fetch: f})
			res := results(rep)
			for _, name := range []string{podsCheck, ringCheck, versionCheck} {
				r := res[name]
				want, shouldFail := c.want[name]
				text := r.Message + "; " + strings.Join(r.Details, "; ")
				switch {
				case shouldFail && (r.OK || !strings.Contains(text, want)):
					t.Errorf("%s: %+v, want a failure with %q", name, r, want)
				case !shouldFail && !r.OK:
					t.Errorf("%s failed: %s", name, text)
				case shouldFail && r.Hint == "":
					t.Errorf("%s failed without saying what to do", name)
				}
			}
		})
	}
}

func TestWebhookCABundleFromCertManager(t *testing.T) {
	env := kubetest.Start(t)
	ns := env.Namespace(t, nil)
	ctx := ctxT(t)
	name := webhookConfigName(ns)
	_, err := env.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{certManagerCAAnn: ns + "/linkerd-proxy-injector"}},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name: "linkerd-proxy-injector.linkerd.io", AdmissionReviewVersions: []string{"v1"}, SideEffects: ptr.To(admissionregistrationv1.SideEffectClassNone),
			ClientConfig:   admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{Name: webhookService, Namespace: ns}},
			ObjectSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"never": "matches"}},
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	crtPEM, keyPEM := keyPair(t, time.Now().Add(-time.Hour), time.Now().Add(365*24*time.Hour))
	secrets := env.Client.CoreV1().Secrets(ns)
	sec, err := secrets.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: webhookSecret},
		Data:       map[string][]byte{"tls.crt": crtPEM, "tls.key": keyPEM},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s := &state{cfg: Config{Namespace: ns, MinValidity: 60 * 24 * time.Hour}, deps: Deps{Kube: env.Client}, now: time.Now()}
	res, _ := checkWebhook(ctx, s)
	if want := "has an empty caBundle (cert-manager's cainjector should fill it from " + ns + "/linkerd-proxy-injector)"; res.OK || !strings.Contains(res.Message, want) {
		t.Fatalf("webhook check before cainjector: %+v, want %q", res, want)
	}
	sec.Data["tls.key"] = []byte("not a key")
	if _, err := secrets.Update(ctx, sec, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if res, _ := checkWebhook(ctx, s); res.OK || !strings.Contains(res.Message, "key does not match") {
		t.Fatalf("webhook check with a bad key: %+v", res)
	}
}

// TestCRDDrift compares the chart's CRDs with those the API server stores: as installed from
// the chart they do not differ (the server's defaults are not differences), and a CRD of an
// older release (a version missing, a schema with a field less) is reported, with what
// differs; one that is not Meridian's is not compared.
func TestCRDDrift(t *testing.T) {
	env := kubetest.Start(t)
	crds, err := chartCRDs()
	if err != nil {
		t.Fatal(err)
	}
	for _, crd := range crds {
		u, err := env.Dynamic.Resource(crdResource).Get(ctxT(t), crd.name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if d := crdDrift(crd, u); d != "" {
			t.Errorf("%s as installed from the chart differs from the chart's: %s", crd.name, d)
		}
		if u.GetLabels()[partOfLabel] != partOfMeridian {
			t.Errorf("%s has no %s=%s label: its drift is never checked", crd.name, partOfLabel, partOfMeridian)
		}
		if crd.name != "servers.policy.linkerd.io" {
			continue
		}
		old := u.DeepCopy()
		versions, _, _ := unstructured.NestedSlice(old.Object, "spec", "versions")
		first := versions[0].(map[string]any)
		props, _, _ := unstructured.NestedMap(first, "schema", "openAPIV3Schema", "properties", "spec", "properties")
		var dropped string
		for k := range props {
			dropped = k
			break
		}
		unstructured.RemoveNestedField(first, "schema", "openAPIV3Schema", "properties", "spec", "properties", dropped)
		if err := unstructured.SetNestedSlice(old.Object, versions[:1], "spec", "versions"); err != nil {
			t.Fatal(err)
		}
		d := crdDrift(crd, old)
		if !strings.Contains(d, "version "+first["name"].(string)+": schema differ") {
			t.Errorf("a schema without spec.%s: drift %q, want its schema reported", dropped, d)
		}
		if len(versions) > 1 && !strings.Contains(d, "version "+versions[1].(map[string]any)["name"].(string)+" is missing") {
			t.Errorf("a version removed: drift %q, want it reported missing", d)
		}
		old.SetLabels(map[string]string{"app.kubernetes.io/part-of": "linkerd"})
		if d := crdDrift(crd, old); d != "" {
			t.Errorf("a CRD another installation owns was compared: %q", d)
		}
	}
}
