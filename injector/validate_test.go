package injector

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/meridian-mesh/meridian/internal/kubetest"
	"github.com/meridian-mesh/meridian/internal/testutil"
)

// profileJSON is a ServiceProfile whose one route has the condition given (in JSON).
func profileJSON(condition string) []byte {
	return []byte(`{"apiVersion":"linkerd.io/v1alpha2","kind":"ServiceProfile","metadata":{"name":"name.ns.svc.cluster.local","namespace":"linkerd-ns"},` +
		`"spec":{"routes":[{"name":"name-1","condition":` + condition + `}]}}`)
}

func profileReview(raw []byte, op admissionv1.Operation, kind metav1.GroupVersionKind) []byte {
	b, _ := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{UID: types.UID("req-1"), Kind: kind, Operation: op,
			Name: "name.ns.svc.cluster.local", Namespace: "linkerd-ns", Object: runtime.RawExtension{Raw: raw}},
	})
	return b
}

var spKind = metav1.GroupVersionKind{Group: "linkerd.io", Version: "v1alpha2", Kind: "ServiceProfile"}

// TestProfileValidator posts AdmissionReviews to the webhook server's ServiceProfile path
// over HTTPS: the sp-validator's answers for linkerd2's TestValidate inputs (a valid profile;
// a condition without a field; an unknown field), and what it lets through untouched.
func TestProfileValidator(t *testing.T) {
	s := startWebhook(t, StaticNamespaces{})
	url := strings.TrimSuffix(s.url, "/") + ServiceProfilePath
	for _, tc := range []struct {
		name    string
		body    []byte
		allowed bool
		msg     string
	}{
		{"valid", profileReview(profileJSON(`{"method":"GET","pathRegex":"/route-1"}`), admissionv1.Create, spKind), true, ""},
		{"no condition field", profileReview(profileJSON(`{}`), admissionv1.Create, spKind), false,
			`ServiceProfile "name.ns.svc.cluster.local" has a route with an invalid condition: A request match must have a field set`},
		{"unknown field on update", profileReview(profileJSON(`{"method":"GET","foo":"bar"}`), admissionv1.Update, spKind), false, `unknown field "foo"`},
		{"a deletion", profileReview(nil, admissionv1.Delete, spKind), true, ""},
		{"another kind", profileReview([]byte(`{}`), admissionv1.Create, metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}), true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := s.client.Post(url, "application/json", bytes.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var out admissionv1.AdmissionReview
			if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("HTTP %d, %v", resp.StatusCode, err)
			}
			r := out.Response
			if r == nil || r.UID != "req-1" || r.Allowed != tc.allowed {
				t.Fatalf("response %+v, want allowed %v", r, tc.allowed)
			}
			if !tc.allowed && (r.Result == nil || r.Result.Code != http.StatusBadRequest || !strings.Contains(r.Result.Message, tc.msg)) {
				t.Fatalf("result %+v, want code 400 saying %q", r.Result, tc.msg)
			}
		})
	}
	resp, err := s.client.Post(url, "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("a body that is no AdmissionReview: HTTP %d, want 400", resp.StatusCode)
	}
}

// TestProfileValidatorWithAPIServer registers the validator with a real kube-apiserver, as the
// chart's ValidatingWebhookConfiguration does, and creates ServiceProfiles: a valid one is
// stored, one the schema admits but the sp-validator refuses is rejected with its reason, and
// so is an update that breaks a stored one.
func TestProfileValidatorWithAPIServer(t *testing.T) {
	env := kubetest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	s := startWebhook(t, StaticNamespaces{})
	selector := fmt.Sprintf("sp-validator-test-%d", time.Now().UnixNano())
	ns := env.Namespace(t, map[string]string{"meridian.test/sp-validator": selector})
	url := strings.TrimSuffix(s.url, "/") + ServiceProfilePath
	fail := admissionregv1.Fail
	none := admissionregv1.SideEffectClassNone
	vwc := &admissionregv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: selector},
		Webhooks: []admissionregv1.ValidatingWebhook{{
			Name:         "linkerd-sp-validator.linkerd.io",
			ClientConfig: admissionregv1.WebhookClientConfig{URL: &url, CABundle: s.caPEM},
			Rules: []admissionregv1.RuleWithOperations{{Operations: []admissionregv1.OperationType{admissionregv1.Create, admissionregv1.Update},
				Rule: admissionregv1.Rule{APIGroups: []string{"linkerd.io"}, APIVersions: []string{"v1alpha1", "v1alpha2"}, Resources: []string{"serviceprofiles"}}}},
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"meridian.test/sp-validator": selector}},
			FailurePolicy:           &fail,
			SideEffects:             &none,
			AdmissionReviewVersions: []string{"v1"},
		}},
	}
	if _, err := env.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, vwc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = env.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(ctx, selector, metav1.DeleteOptions{})
	})
	sps := env.Dynamic.Resource(schema.GroupVersionResource{Group: "linkerd.io", Version: "v1alpha2", Resource: "serviceprofiles"}).Namespace(ns)
	profile := func(name string, cond map[string]any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "linkerd.io/v1alpha2", "kind": "ServiceProfile",
			"metadata": map[string]any{"name": name, "namespace": ns},
			"spec":     map[string]any{"routes": []any{map[string]any{"name": "r", "condition": cond}}},
		}}
	}
	stored, err := sps.Create(ctx, profile("web."+ns+".svc.cluster.local", map[string]any{"pathRegex": "/a"}), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create a valid profile: %v", err)
	}
	const refusal = "A request match must have a field set"
	// The API server takes up a new webhook configuration within a moment: until then the
	// invalid profile is stored (and deleted again for the next try).
	invalid := profile("db."+ns+".svc.cluster.local", map[string]any{})
	testutil.EventuallyEvery(t, 30*time.Second, 200*time.Millisecond, "the sp-validator to refuse an invalid profile", func() bool {
		_, err := sps.Create(ctx, invalid, metav1.CreateOptions{})
		if err == nil {
			_ = sps.Delete(ctx, invalid.GetName(), metav1.DeleteOptions{})
			return false
		}
		if !strings.Contains(err.Error(), refusal) {
			t.Fatalf("create an invalid profile: %v, want the sp-validator's refusal", err)
		}
		return true
	})
	stored.Object["spec"] = invalid.Object["spec"]
	if _, err := sps.Update(ctx, stored, metav1.UpdateOptions{}); err == nil || !strings.Contains(err.Error(), refusal) {
		t.Fatalf("update to an invalid profile: %v, want the sp-validator's refusal", err)
	}
}
