package injector

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestWebhookLongInputsCutShort sends reviews with 100,000-byte values where the webhook
// shows what it was sent: a namespace (only a hand-made review has one that is no name), a
// pod name and a controller's kind and name (the API server sends them before validating
// the pod), a UID, and a number no field can hold. Every answer and log entry stays short,
// and the long namespace is refused as a failed lookup without one.
func TestWebhookLongInputsCutShort(t *testing.T) {
	long := strings.Repeat("x", 100_000)
	core, logs := observer.New(zapcore.DebugLevel)
	lookups := 0
	ns := lookupFunc(func(_ context.Context, name string) (Meta, error) {
		lookups++
		return Meta{Annotations: map[string]string{AnnotationInject: InjectEnabled}}, nil
	})
	wh, err := NewWebhook(webhookConfig(), ns, nil, zap.New(core))
	if err != nil {
		t.Fatal(err)
	}
	review := func(pod *corev1.Pod, change func(*admissionv1.AdmissionRequest)) *admissionv1.AdmissionResponse {
		t.Helper()
		r, err := DecodeReview(bytes.NewReader(podReview(t, pod, admissionv1.Create)))
		if err != nil {
			t.Fatal(err)
		}
		change(r.Request)
		return wh.Review(context.Background(), r.Request)
	}
	containers := corev1.PodSpec{Containers: []corev1.Container{{Name: "a"}}}
	resp := review(&corev1.Pod{Spec: containers}, func(r *admissionv1.AdmissionRequest) { r.Namespace = long })
	if resp.Allowed || resp.Result == nil || !strings.Contains(resp.Result.Message, "not a namespace name") || len(resp.Result.Message) > 1024 || lookups != 0 {
		t.Errorf("long namespace: %d lookups, %.300v", lookups, resp.Result)
	}
	owned := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: long, OwnerReferences: []metav1.OwnerReference{
		{Kind: long, Name: long, Controller: ptr(true)}}}, Spec: containers}
	if resp := review(owned, func(r *admissionv1.AdmissionRequest) { r.UID = types.UID(long) }); !resp.Allowed {
		t.Errorf("long owner: %+v", resp.Result)
	}
	if logs.Len() == 0 {
		t.Fatal("no log entries")
	}
	for _, e := range logs.All() {
		for k, v := range e.ContextMap() {
			if s := fmt.Sprint(v); len(s) > 1024 {
				t.Errorf("log %q: field %s of %d bytes", e.Message, k, len(s))
			}
		}
	}
	body := `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","operation":"CREATE","object":{}},"response":{"uid":"u","allowed":true,"status":{"code":` + strings.Repeat("9", 100_000) + `}}}`
	if _, err := DecodeReview(strings.NewReader(body)); err == nil || len(err.Error()) > 1024 {
		t.Errorf("a long number: %d bytes: %.300v", len(fmt.Sprint(err)), err)
	}
}

// lookupFunc is a NamespaceLookup of a function.
type lookupFunc func(context.Context, string) (Meta, error)

func (f lookupFunc) Namespace(ctx context.Context, name string) (Meta, error) { return f(ctx, name) }
