package injector

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/meridian-mesh/meridian/internal/kubetest"
	"github.com/meridian-mesh/meridian/internal/testutil"
	"go.uber.org/zap/zaptest"
)

func TestMain(m *testing.M) { os.Exit(testutil.Main(m, kubetest.Main)) }

// TestWebhookWithAPIServer registers the webhook (served over HTTPS on loopback) with a
// real kube-apiserver and creates pods: one in a namespace annotated linkerd.io/inject:
// enabled comes back injected; one annotated disabled comes back untouched.
func TestWebhookWithAPIServer(t *testing.T) {
	env := kubetest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	s := startWebhook(t, &KubeNamespaces{Client: env.Client})
	selector := fmt.Sprintf("injector-test-%d", time.Now().UnixNano())
	ns := env.Namespace(t, map[string]string{"meridian.test/injector": selector})
	nsObj, err := env.Client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	nsObj.Annotations = map[string]string{AnnotationInject: InjectEnabled, AnnotationProxyCPURequest: "25m"}
	if _, err := env.Client.CoreV1().Namespaces().Update(ctx, nsObj, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	url := s.url
	fail := admissionregv1.Fail
	none := admissionregv1.SideEffectClassNone
	timeout := int32(10)
	whc := &admissionregv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: selector},
		Webhooks: []admissionregv1.MutatingWebhook{{
			Name:                    "linkerd-proxy-injector.linkerd.io",
			ClientConfig:            admissionregv1.WebhookClientConfig{URL: &url, CABundle: s.caPEM},
			Rules:                   []admissionregv1.RuleWithOperations{{Operations: []admissionregv1.OperationType{admissionregv1.Create}, Rule: admissionregv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}}}},
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"meridian.test/injector": selector}},
			FailurePolicy:           &fail,
			SideEffects:             &none,
			AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds:          &timeout,
		}},
	}
	if _, err := env.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, whc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = env.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(ctx, selector, metav1.DeleteOptions{})
	})

	newPod := func(name string, ann map[string]string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Annotations: ann},
			// A real cluster's ServiceAccount admission plugin sets "default" before webhooks
			// run; the test API server runs without it (nothing creates ServiceAccounts), and
			// the projected identity token is only valid with a ServiceAccount.
			Spec: corev1.PodSpec{ServiceAccountName: "default", Containers: []corev1.Container{{
				Name: "app", Image: "registry.example/app:1",
				Ports: []corev1.ContainerPort{{ContainerPort: 8080}},
			}}},
		}
	}
	// The API server picks the webhook configuration up asynchronously: create pods until
	// one comes back injected.
	var got *corev1.Pod
	i := 0
	testutil.EventuallyEvery(t, time.Minute, 200*time.Millisecond, "a pod to come back injected", func() bool {
		p, err := env.Client.CoreV1().Pods(ns).Create(ctx, newPod(fmt.Sprintf("web-%d", i), nil), metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("create pod: %v", err)
		}
		i++
		got = p
		return len(p.Spec.InitContainers) > 0
	})
	checkInjectedBasics(t, got)
	proxy := got.Spec.InitContainers[1]
	if proxy.RestartPolicy == nil || *proxy.RestartPolicy != corev1.ContainerRestartPolicyAlways {
		t.Errorf("proxy is not a native sidecar: %+v", proxy.RestartPolicy)
	}
	if len(proxy.Command) != 1 || proxy.Command[0] != "meridian-proxy" {
		t.Errorf("proxy command %q, want [meridian-proxy] (the proxy built alone)", proxy.Command)
	}
	if proxy.Resources.Requests.Cpu().String() != "25m" {
		t.Errorf("namespace annotation did not flow down: %v", proxy.Resources.Requests)
	}
	if got.Labels[LabelWorkloadNS] != ns || got.Labels["linkerd.io/proxy-pod"] == "" {
		t.Errorf("labels %v", got.Labels)
	}
	var token bool
	for _, v := range got.Spec.Volumes {
		if v.Name == volumeIdentityToken && v.Projected != nil {
			token = true
		}
	}
	if !token {
		t.Error("no projected identity token volume")
	}

	skipped, err := env.Client.CoreV1().Pods(ns).Create(ctx, newPod("opted-out", map[string]string{AnnotationInject: InjectDisabled}), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(skipped.Spec.InitContainers) != 0 || len(skipped.Spec.Containers) != 1 || strings.HasPrefix(skipped.Annotations[AnnotationCreatedBy], "meridian") {
		t.Errorf("opted-out pod was modified: %+v", skipped.Spec)
	}
	checkBadAnnotationsWarned(ctx, t, env, newPod("bad-annotations", map[string]string{
		AnnotationProxyUID: "-5", AnnotationSkipInboundPorts: "1-99999", AnnotationProxyCPURequest: "garbage",
	}))
}

// checkBadAnnotationsWarned creates pod, whose annotations are bad, in an injecting
// namespace whose cpu request is 25m: it is not left unmeshed but injected with the
// defaults and the namespace's value, and the client that created it receives the warnings
// (kubectl prints these).
func checkBadAnnotationsWarned(ctx context.Context, t *testing.T, env *kubetest.Env, pod *corev1.Pod) {
	t.Helper()
	warnings := &warningCollector{}
	cfg := rest.CopyConfig(env.Config)
	cfg.WarningHandler = warnings
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	bad, err := client.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checkInjectedBasics(t, bad)
	if p := bad.Spec.InitContainers[1]; *p.SecurityContext.RunAsUser != 2102 || p.Resources.Requests.Cpu().String() != "25m" {
		t.Errorf("the bad fields did not get the default and the namespace's value: uid %d, requests %v", *p.SecurityContext.RunAsUser, p.Resources.Requests)
	}
	seen := strings.Join(warnings.list(), "\n")
	for _, want := range []string{
		`config.linkerd.io/proxy-uid="-5" on the workload is ignored`,
		`config.linkerd.io/skip-inbound-ports="1-99999" on the workload is ignored`,
		`config.linkerd.io/proxy-cpu-request="garbage" on the workload is ignored: not a quantity (want e.g. 100m, 1, 64Mi); the namespace's value applies`,
	} {
		if !strings.Contains(seen, want) {
			t.Errorf("the API server's warnings lack %q:\n%s", want, seen)
		}
	}
}

// warningCollector keeps the warnings the API server sends (a rest.WarningHandler).
type warningCollector struct {
	mu  sync.Mutex
	got []string
}

func (w *warningCollector) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.got = append(w.got, text)
}

func (w *warningCollector) list() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.got...)
}

// TestTrustAnchorsFollowTheConfigMap: the injector reads the trust-roots ConfigMap on the
// real API server, refuses pods while it has no anchors (none yet, or a ConfigMap without
// ca-bundle.crt), refuses a bundle that is not certificates only (a key written there by
// mistake never goes into pods' specs; the last good anchors stay), and takes a rotation
// without a restart.
func TestTrustAnchorsFollowTheConfigMap(t *testing.T) {
	env := kubetest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ns := env.Namespace(t, nil)
	wh, err := NewWebhook(DefaultConfig(), StaticNamespaces{"apps": {Annotations: map[string]string{AnnotationInject: InjectEnabled}}}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	a := &anchorsWatch{kube: env.Client, ns: ns, name: "linkerd-identity-trust-roots", every: 50 * time.Millisecond, wh: wh, log: zaptest.NewLogger(t)}
	// inject reviews a pod: whether it was admitted, and its patch.
	inject := func() (allowed bool, patch string) {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "apps"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app"}}}}
		var review admissionv1.AdmissionReview
		if err := json.Unmarshal(podReview(t, pod, admissionv1.Create), &review); err != nil {
			t.Fatal(err)
		}
		resp := wh.Review(ctx, review.Request)
		if !resp.Allowed {
			return false, ""
		}
		return true, string(resp.Patch)
	}
	// injects says whether a pod is injected with the bundle pem (as the patch's JSON holds it).
	injects := func(pem string) bool {
		js, _ := json.Marshal(pem)
		ok, patch := inject()
		return ok && strings.Contains(patch, strings.Trim(string(js), `"`))
	}
	read := func() {
		t.Helper()
		if err := a.read(ctx); err != nil {
			t.Fatal(err)
		}
	}
	setBundle := func(pem string, create bool) {
		t.Helper()
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: a.name, Namespace: ns}, Data: map[string]string{"ca-bundle.crt": pem}}
		var err error
		if create {
			_, err = env.Client.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{})
		} else {
			_, err = env.Client.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	oldRoots, newRoots := string(testutil.NewPKI(t).AnchorPEM()), string(testutil.NewPKI(t).AnchorPEM())
	keyPEM := "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIG5vdCBhIHJlYWwga2V5IGF0IGFsbCwganVzdCBieXRlcw==\n-----END EC PRIVATE KEY-----\n"
	cutKey := "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIG5vdCBhIHJlYWwga2V5IGF0IGFsbCwganVzdCBieXRlcw==\n" // its END line lost

	read()
	if ok, _ := inject(); ok {
		t.Fatal("a pod was injected before there were trust anchors")
	}
	setBundle(oldRoots+keyPEM, true)
	read()
	if ok, patch := inject(); ok {
		t.Fatalf("a pod was injected with a bundle that holds a key; patch has the key: %v", strings.Contains(patch, "PRIVATE KEY"))
	}
	setBundle(oldRoots, false)
	read()
	if !injects(oldRoots) {
		t.Fatal("the anchors were not taken once the bundle was certificates only")
	}
	setBundle(oldRoots+keyPEM, false)
	read()
	if !injects(oldRoots) {
		t.Fatal("a refused bundle did not leave the last good anchors")
	}
	setBundle(oldRoots+cutKey, false)
	read()
	if !injects(oldRoots) {
		t.Fatal("a bundle with a key cut short did not leave the last good anchors")
	}
	if _, patch := inject(); strings.Contains(patch, "PRIVATE KEY") {
		t.Fatal("a key in the ConfigMap went into a pod's spec")
	}

	testutil.Go(t, "anchors", func(ctx context.Context) error { a.run(ctx); return nil })
	setBundle(oldRoots+newRoots, false)
	testutil.Eventually(t, 20*time.Second, "the rotation to be read", func() bool { return injects(oldRoots + newRoots) })
}

// TestServerRunEndsWithServe: when serving fails (here its listener is closed), Run returns
// the error, with the trust anchors' watch stopped, rather than wait for its context.
func TestServerRunEndsWithServe(t *testing.T) {
	env := kubetest.Start(t)
	dir := t.TempDir()
	cf, kf := newTestCert(t, "injector-1").write(t, dir)
	cfg := DefaultServerConfig()
	cfg.CertFile, cfg.KeyFile, cfg.ControlPlaneNamespace, cfg.CertPoll = cf, kf, env.Namespace(t, nil), 0
	lis := testutil.Listen(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := NewServer(ctx, cfg, Deps{Kube: env.Client, Listener: lis, Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	_ = lis.Close()
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	select {
	case err := <-done:
		if err == nil {
			t.Error("Run returned no error though serving failed")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serving failed, but Run did not return until its context ended")
	}
}
