package injector

import (
	"bytes"
	"net/http"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BenchmarkServeHTTP measures one admission review end to end in process: decode the
// AdmissionReview and the Pod, decide, build and encode the patch, encode the response.
func BenchmarkServeHTTP(b *testing.B) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "web-abc-", Labels: map[string]string{"app": "web", "pod-template-hash": "abc"}, OwnerReferences: controller("ReplicaSet", "web-abc")},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:1", Ports: []corev1.ContainerPort{{ContainerPort: 8080}}}}},
	}
	body := podReview(b, pod, admissionv1.Create)
	wh, err := NewWebhook(webhookConfig(), StaticNamespaces{"apps": {Annotations: map[string]string{AnnotationInject: InjectEnabled}}}, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		req, _ := http.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
		rec := newRecorder()
		wh.ServeHTTP(rec, req)
		if rec.code != http.StatusOK {
			b.Fatalf("status %d", rec.code)
		}
	}
}
