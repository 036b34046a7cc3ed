package injector

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/meridian-mesh/meridian/internal/testutil"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

// testCert is a self-signed serving certificate for 127.0.0.1.
type testCert struct {
	certPEM, keyPEM []byte
	cert            *x509.Certificate
}

func newTestCert(t testing.TB, cn string) testCert {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:              []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return testCert{
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}),
		cert:    cert,
	}
}

func (c testCert) write(t testing.TB, dir string) (string, string) {
	t.Helper()
	cf, kf := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	// Write to temporary names and rename, as a Secret volume update is atomic.
	for _, f := range []struct {
		path string
		data []byte
	}{{cf, c.certPEM}, {kf, c.keyPEM}} {
		tmp := f.path + ".tmp"
		if err := os.WriteFile(tmp, f.data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, f.path); err != nil {
			t.Fatal(err)
		}
	}
	return cf, kf
}

// webhookServer is a webhook served over real HTTPS on 127.0.0.1.
type webhookServer struct {
	url    string
	client *http.Client
	roots  *x509.CertPool
	reg    *prometheus.Registry
	certs  *CertReloader
	dir    string
	caPEM  []byte
}

func startWebhook(t *testing.T, ns NamespaceLookup) *webhookServer {
	t.Helper()
	return startWebhookWithLog(t, ns, nil)
}

// testAnchorsPEM stands in for the trust anchors the injector gives proxies.
const testAnchorsPEM = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"

// webhookConfig is DefaultConfig with trust anchors, as a deployed injector has them.
func webhookConfig() Config {
	cfg := DefaultConfig()
	cfg.TrustAnchorsPEM = testAnchorsPEM
	return cfg
}

// startWebhookWithLog is startWebhook with the webhook logging to log.
func startWebhookWithLog(t *testing.T, ns NamespaceLookup, log *zap.Logger) *webhookServer {
	t.Helper()
	dir := t.TempDir()
	tc := newTestCert(t, "injector-1")
	cf, kf := tc.write(t, dir)
	certs, err := NewCertReloader(cf, kf, 50*time.Millisecond, nil)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	wh, err := NewWebhook(webhookConfig(), ns, m, log)
	if err != nil {
		t.Fatal(err)
	}
	lis := testutil.Listen(t)
	testutil.Go(t, "Serve", func(ctx context.Context) error {
		return Serve(ctx, lis, Handler(wh, NewProfileValidator(log)), certs, nil)
	})
	roots := x509.NewCertPool()
	roots.AddCert(tc.cert)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
	}}
	t.Cleanup(client.CloseIdleConnections)
	return &webhookServer{url: "https://" + lis.Addr().String() + "/", client: client, roots: roots, reg: reg, certs: certs, dir: dir, caPEM: tc.certPEM}
}

func podReview(t testing.TB, pod *corev1.Pod, op admissionv1.Operation) []byte {
	t.Helper()
	raw, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	r := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:       types.UID("req-1"),
			Kind:      metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
			Resource:  metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
			Namespace: "apps",
			Operation: op,
			Object:    runtime.RawExtension{Raw: raw},
		},
	}
	b, err := json.Marshal(&r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (s *webhookServer) post(t *testing.T, body []byte) (int, []byte) {
	t.Helper()
	resp, err := s.client.Post(s.url, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

func (s *webhookServer) review(t *testing.T, body []byte) *admissionv1.AdmissionResponse {
	t.Helper()
	code, b := s.post(t, body)
	if code != http.StatusOK {
		t.Fatalf("status %d: %s", code, b)
	}
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if out.APIVersion != "admission.k8s.io/v1" || out.Kind != "AdmissionReview" || out.Response == nil {
		t.Fatalf("bad review back: %s", b)
	}
	if out.Response.UID != "req-1" || !out.Response.Allowed {
		t.Fatalf("response uid %q allowed %v", out.Response.UID, out.Response.Allowed)
	}
	return out.Response
}

func TestWebhookHTTPS(t *testing.T) {
	s := startWebhook(t, StaticNamespaces{
		"apps": {Annotations: map[string]string{AnnotationInject: "enabled", AnnotationProxyCPURequest: "150m"}},
	})
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "web-abc-", Labels: map[string]string{"pod-template-hash": "abc"}, OwnerReferences: controller("ReplicaSet", "web-abc")},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app"}}},
	}

	t.Run("inject", func(t *testing.T) {
		resp := s.review(t, podReview(t, pod, admissionv1.Create))
		if resp.PatchType == nil || *resp.PatchType != admissionv1.PatchTypeJSONPatch || len(resp.Patch) == 0 {
			t.Fatalf("no JSON patch: %+v", resp)
		}
		var ops []PatchOp
		if err := json.Unmarshal(resp.Patch, &ops); err != nil {
			t.Fatal(err)
		}
		got := applyPatch(t, pod, ops)
		checkInjectedBasics(t, got)
		if got.Spec.InitContainers[1].Resources.Requests.Cpu().String() != "150m" {
			t.Errorf("namespace cpu request annotation not honoured: %+v", got.Spec.InitContainers[1].Resources)
		}
	})
	t.Run("skip keeps pod", func(t *testing.T) {
		p := pod.DeepCopy()
		p.Annotations = map[string]string{AnnotationInject: "disabled"}
		resp := s.review(t, podReview(t, p, admissionv1.Create))
		if resp.Patch != nil || resp.Result == nil || !strings.Contains(resp.Result.Message, ReasonDisableAnnotation) {
			t.Fatalf("want an unpatched response naming the reason, got %+v", resp)
		}
	})
	t.Run("invalid annotation value is ignored with a warning", func(t *testing.T) {
		p := pod.DeepCopy()
		p.Annotations = map[string]string{AnnotationProxyMemoryLimit: "a lot"}
		resp := s.review(t, podReview(t, p, admissionv1.Create))
		if resp.Patch == nil || len(resp.Warnings) != 1 || !strings.Contains(resp.Warnings[0], `config.linkerd.io/proxy-memory-limit="a lot" on the workload is ignored`) {
			t.Fatalf("want a patch and a warning naming proxy-memory-limit, got %+v", resp)
		}
	})
	t.Run("not a pod object", func(t *testing.T) {
		b := podReview(t, pod, admissionv1.Create)
		b = bytes.Replace(b, []byte(`"object":{`), []byte(`"object":{"spec":{"containers":7},`), 1)
		resp := s.review(t, b)
		if resp.Patch != nil || !strings.Contains(resp.Result.Message, ReasonInvalidPod) {
			t.Fatalf("got %+v", resp.Result)
		}
	})
	t.Run("update is not handled", func(t *testing.T) {
		resp := s.review(t, podReview(t, pod, admissionv1.Update))
		if resp.Patch != nil || !strings.Contains(resp.Result.Message, ReasonUnsupportedOperation) {
			t.Fatalf("got %+v", resp.Result)
		}
	})
	t.Run("bad bodies get 400 with the reason", func(t *testing.T) { checkBadBodies(t, s) })
	t.Run("metrics", func(t *testing.T) { checkInjectMetrics(t, s) })
}

// checkBadBodies: malformed reviews get 400 naming what is wrong, quoting a short prefix only,
// and a GET gets 405.
func checkBadBodies(t *testing.T, s *webhookServer) {
	for body, want := range map[string]string{
		``:   "empty body",
		`{`:  "decode AdmissionReview",
		`[]`: "decode AdmissionReview",
		`{"apiVersion":"v1","kind":"AdmissionReview","request":{"uid":"x"}}`:         "admission.k8s.io/v1",
		`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`:              "no request",
		`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{}}`: "no uid",
	} {
		code, b := s.post(t, []byte(body))
		if code != http.StatusBadRequest || !strings.Contains(string(b), want) {
			t.Errorf("body %q: status %d %q, want 400 containing %q", body, code, b, want)
		}
	}
	code, _ := s.post(t, bytes.Repeat([]byte(" "), MaxReviewBytes+1))
	if code != http.StatusBadRequest {
		t.Errorf("oversized body: status %d, want 400", code)
	}
	// A long apiVersion is quoted by a prefix (it was echoed whole: 100 kB answered 100 kB).
	long := strings.Repeat("v", 100<<10)
	code, b := s.post(t, []byte(`{"apiVersion":"`+long+`","kind":"`+long+`","request":{"uid":"x"}}`))
	if code != http.StatusBadRequest || len(b) > 1024 {
		t.Errorf("a 100 KiB apiVersion and kind: status %d, a %d-byte answer", code, len(b))
	}
	resp, err := s.client.Get(s.url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET: status %d", resp.StatusCode)
	}
}

// checkInjectMetrics: the reviews TestWebhookHTTPS sent are counted, with Linkerd's labels.
func checkInjectMetrics(t *testing.T, s *webhookServer) {
	mfs, err := s.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found, requests := false, 0.0
	for _, mf := range mfs {
		if mf.GetName() == "proxy_inject_admission_requests_total" {
			for _, m := range mf.GetMetric() {
				requests += m.GetCounter().GetValue()
			}
		}
		if mf.GetName() != "proxy_inject_admission_responses_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, lp := range m.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			if l["owner_kind"] == "deployment" && l["namespace"] == "apps" && l["skip"] == "false" &&
				l["annotation_at"] == AtNamespace && l["proxy_cpu_request"] == "set" {
				found = true
			}
			for _, name := range []string{"skip_reason", "proxy_memory_limit", "proxy_enable_native_sidecar"} {
				if _, ok := l[name]; !ok {
					t.Errorf("label %s missing", name)
				}
			}
		}
	}
	if requests < 4 {
		t.Errorf("requests_total sums to %v, want at least 4", requests)
	}
	if !found {
		t.Error("no injected-response series with owner_kind=deployment namespace=apps annotation_at=namespace")
	}
}

func checkInjectedBasics(t *testing.T, got *corev1.Pod) {
	t.Helper()
	if len(got.Spec.InitContainers) < 2 || got.Spec.InitContainers[0].Name != InitContainerName || got.Spec.InitContainers[1].Name != ProxyContainerName {
		t.Fatalf("init containers %+v", got.Spec.InitContainers)
	}
	if got.Labels[LabelControlPlaneNS] != "linkerd" || got.Annotations[AnnotationCreatedBy] == "" {
		t.Fatalf("labels %v annotations %v", got.Labels, got.Annotations)
	}
}

// failingLookup fails every lookup.
type failingLookup struct{}

func (failingLookup) Namespace(context.Context, string) (Meta, error) {
	return Meta{}, errors.New("apiserver unreachable")
}

// TestWebhookNamespaceLookupFailureRefuses: a pod whose namespace cannot be read is refused
// (the namespace may ask for the proxy; admitting it would start it without one), unless its
// own annotation disables injection.
func TestWebhookNamespaceLookupFailureRefuses(t *testing.T) {
	wh, err := NewWebhook(webhookConfig(), failingLookup{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	review := func(annotations map[string]string) *admissionv1.AdmissionResponse {
		t.Helper()
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: annotations}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "a"}}}}
		r, err := DecodeReview(bytes.NewReader(podReview(t, pod, admissionv1.Create)))
		if err != nil {
			t.Fatal(err)
		}
		return wh.Review(context.Background(), r.Request)
	}
	for _, ann := range []map[string]string{nil, {AnnotationInject: InjectEnabled}} {
		resp := review(ann)
		if resp.Allowed || resp.Patch != nil || resp.Result == nil || resp.Result.Code != http.StatusServiceUnavailable ||
			!strings.Contains(resp.Result.Message, "apiserver unreachable") || !strings.Contains(resp.Result.Message, "refused") {
			t.Fatalf("annotations %v: got %+v", ann, resp)
		}
	}
	if resp := review(map[string]string{AnnotationInject: InjectDisabled}); !resp.Allowed || resp.Patch != nil ||
		!strings.Contains(resp.Result.Message, ReasonNamespaceLookupFailure) {
		t.Fatalf("pod that disables injection: got %+v", resp)
	}
}

func TestCertReload(t *testing.T) {
	s := startWebhook(t, StaticNamespaces{})
	serverCN := func() string {
		conn, err := tls.Dial("tcp", strings.TrimSuffix(strings.TrimPrefix(s.url, "https://"), "/"),
			&tls.Config{InsecureSkipVerify: true}) //nolint:gosec // the test inspects whichever cert is served
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].Subject.CommonName
	}
	if cn := serverCN(); cn != "injector-1" {
		t.Fatalf("serving %q", cn)
	}
	// A broken pair (new cert, old key) is not loaded; the old pair keeps serving.
	next := newTestCert(t, "injector-2")
	if err := os.WriteFile(filepath.Join(s.dir, "tls.crt"), next.certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	// Over several of the reloader's 50 ms polls.
	testutil.Never(t, 300*time.Millisecond, "serving another certificate while the pair is inconsistent", func() bool { return serverCN() != "injector-1" })
	next.write(t, s.dir)
	testutil.Eventually(t, 10*time.Second, "the new certificate to be served", func() bool { return serverCN() == "injector-2" })
	if s.certs.Reloads() < 1 {
		t.Errorf("reloads %d", s.certs.Reloads())
	}
}

// FuzzAdmissionReview feeds arbitrary bodies to the handler: it must never panic and must
// answer 200 (a valid review, always allowed) or 400.
func FuzzAdmissionReview(f *testing.F) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Annotations: map[string]string{AnnotationInject: "enabled", AnnotationProxyCPULimit: "1"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "a", Ports: []corev1.ContainerPort{{ContainerPort: 80}}}}},
	}
	f.Add(podReview(f, pod, admissionv1.Create))
	f.Add(podReview(f, &corev1.Pod{}, admissionv1.Create))
	f.Add(podReview(f, &corev1.Pod{Spec: corev1.PodSpec{HostNetwork: true}}, admissionv1.Delete))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"kind":"Pod"},"operation":"CREATE","object":{"metadata":{"annotations":{"config.linkerd.io/proxy-uid":"x"}}}}}`))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"kind":"Pod"},"operation":"CREATE","object":null}}`))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"kind":"Pod"},"operation":"CREATE","namespace":"apps","object":{"spec":{"containers":[{"name":"a"}]}}}}`))
	f.Add(podReview(f, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{
		AnnotationProxyCPURequest: "garbage", AnnotationProxyUID: "-5", AnnotationSkipInboundPorts: "1-99999", AnnotationProxyInboundPort: "4140",
	}}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "a"}}}}, admissionv1.Create))
	for _, v := range []string{"Deny", " deny ", "audit"} {
		f.Add(podReview(f, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{AnnotationInject: "enabled", AnnotationDefaultInboundPolicy: v}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "a"}}}}, admissionv1.Create))
	}
	f.Add([]byte(`{}`))
	f.Add([]byte(`null`))
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		f.Fatal(err)
	}
	wh, err := NewWebhook(webhookConfig(), StaticNamespaces{"apps": {Annotations: map[string]string{AnnotationInject: "enabled"}}}, m, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := http.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		rec := newRecorder()
		wh.ServeHTTP(rec, req)
		switch rec.code {
		case http.StatusBadRequest:
		case http.StatusOK:
			var out admissionv1.AdmissionReview
			if err := json.Unmarshal(rec.body.Bytes(), &out); err != nil || out.Response == nil {
				t.Fatalf("200 without a review: %s", rec.body.Bytes())
			}
			// This lookup never fails, so the one refusal is of a namespace that is not a
			// namespace name (a hand-made review's), answered as a failed lookup.
			if r := out.Response; !r.Allowed && (r.Result == nil || r.Result.Code != http.StatusServiceUnavailable ||
				!strings.Contains(r.Result.Message, "not a namespace name")) {
				t.Fatalf("200 without an allowed review: %s", rec.body.Bytes())
			}
			if out.Response.Patch != nil {
				// The patch must apply cleanly to the object it was computed for.
				var in admissionv1.AdmissionReview
				if err := json.Unmarshal(body, &in); err != nil {
					t.Fatalf("a patch for a body that does not decode: %v", err)
				}
				p, err := jsonpatch.DecodePatch(out.Response.Patch)
				if err != nil {
					t.Fatalf("patch does not decode: %v", err)
				}
				patched, err := p.Apply(in.Request.Object.Raw)
				if err != nil {
					t.Fatalf("patch does not apply: %v\npatch %s\nobject %s", err, out.Response.Patch, in.Request.Object.Raw)
				}
				checkCarriesProxyPolicy(t, in.Request.Object.Raw, patched, webhookConfig().Proxy.DefaultInbound)
			}
		default:
			t.Fatalf("status %d: %s", rec.code, rec.body.Bytes())
		}
	})
}

// recorder is a minimal http.ResponseWriter (httptest.ResponseRecorder works too; this
// keeps MaxBytesReader's behaviour identical to a real connection).
type recorder struct {
	hdr  http.Header
	code int
	body bytes.Buffer
}

func newRecorder() *recorder { return &recorder{hdr: http.Header{}} }

func (r *recorder) Header() http.Header { return r.hdr }
func (r *recorder) Write(b []byte) (int, error) {
	if r.code == 0 {
		r.code = http.StatusOK
	}
	return r.body.Write(b)
}
func (r *recorder) WriteHeader(code int) {
	if r.code == 0 {
		r.code = code
	}
}

// TestWebhookKeysAreCaseSensitive: the API server reads JSON keys exactly, so a pod whose
// metadata has "Annotations" has no annotations there, and the patch is computed for, and
// applies to, the object the API server holds. encoding/json alone matches keys in any
// case: it read that key as annotations, skipped this pod on its inject: disabled, and
// for other annotations wrote a patch adding to /metadata/annotations, which the raw
// object lacks (FuzzAdmissionReview's seed 36e2bc7616a3c593).
func TestWebhookKeysAreCaseSensitive(t *testing.T) {
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	wh, err := NewWebhook(webhookConfig(), StaticNamespaces{"apps": {Annotations: map[string]string{AnnotationInject: "enabled"}}}, m, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, pod := range []string{
		`{"metadata":{"Annotations":{"linkerd.io/inject":"disabled"}},"spec":{"containers":[{"name":"a"}]}}`,
		`{"metadata":{"annotatioNs":{"config.linkerd.io/proxy-uid":"7"}},"spec":{"containers":[{"name":"a"}]}}`,
		`{"Metadata":{"name":"x"},"spec":{"containers":[{"name":"a"}]}}`,
	} {
		body := `{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"uid":"u1",` +
			`"kind":{"group":"","version":"v1","kind":"Pod"},"namespace":"apps","operation":"CREATE","object":` + pod + `}}`
		req, err := http.NewRequest(http.MethodPost, "/", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		rec := newRecorder()
		wh.ServeHTTP(rec, req)
		var out admissionv1.AdmissionReview
		if err := json.Unmarshal(rec.body.Bytes(), &out); err != nil || out.Response == nil {
			t.Fatalf("%s: status %d %s", pod, rec.code, rec.body.Bytes())
		}
		if out.Response.Patch == nil {
			t.Errorf("%s: not injected: %+v", pod, out.Response.Result)
			continue
		}
		p, err := jsonpatch.DecodePatch(out.Response.Patch)
		if err != nil {
			t.Fatal(err)
		}
		got, err := p.Apply([]byte(pod))
		if err != nil {
			t.Errorf("%s: patch does not apply: %v", pod, err)
			continue
		}
		if strings.Contains(string(got), `"runAsUser":7`) {
			t.Errorf("%s: an annotation under a miscased key was honoured: %s", pod, got)
		}
	}
}
