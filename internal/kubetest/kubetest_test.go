package kubetest_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/meridian-mesh/meridian/internal/kubetest"
	"github.com/meridian-mesh/meridian/internal/testutil"
)

// identityAudience is the audience Meridian's identity component (like Linkerd's) requests
// for the ServiceAccount tokens proxies present, and checks with a TokenReview.
const identityAudience = "identity.l5d.io"

func TestMain(m *testing.M) { os.Exit(testutil.Main(m, kubetest.Main)) }

func ctxT(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func TestServerVersionNamespaceAndConfigMap(t *testing.T) {
	env := kubetest.Start(t)
	ctx := ctxT(t, time.Minute)

	v, err := env.Client.Discovery().ServerVersion()
	if err != nil {
		t.Fatalf("GET /version: %v", err)
	}
	if v.GitVersion != kubetest.KubeVersion || v.Major != "1" || v.Minor != "37" {
		t.Fatalf("/version = %s (major %q minor %q), want %s: built without the version ldflags?",
			v.GitVersion, v.Major, v.Minor, kubetest.KubeVersion)
	}

	ns := env.Namespace(t, map[string]string{"meridian.io/test": "kubetest"})
	got, err := env.Client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get namespace %s: %v", ns, err)
	}
	if got.Labels["meridian.io/test"] != "kubetest" {
		t.Fatalf("namespace labels = %v", got.Labels)
	}

	cms := env.Client.CoreV1().ConfigMaps(ns)
	created, err := cms.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "c1"},
		Data:       map[string]string{"k": "v"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create ConfigMap: %v", err)
	}
	cm, err := cms.Get(ctx, "c1", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get ConfigMap: %v", err)
	}
	if cm.Data["k"] != "v" || cm.UID != created.UID {
		t.Fatalf("got ConfigMap %v (uid %s), want data k=v uid %s", cm.Data, cm.UID, created.UID)
	}
	if _, err := cms.Get(ctx, "absent", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("get absent ConfigMap: err = %v, want NotFound", err)
	}
	// A second namespace is distinct: tests sharing the server do not see each other's objects.
	if other := env.Namespace(t, nil); other == ns {
		t.Fatalf("Namespace returned %s twice", ns)
	}
}

func TestCRDClientsWork(t *testing.T) {
	env := kubetest.Start(t)
	// Whatever the chart's crds/ folder holds (possibly nothing yet), the apiextensions client must work
	// and every CRD installed from it must be Established.
	crds, err := env.APIExt.ApiextensionsV1().CustomResourceDefinitions().List(ctxT(t, time.Minute), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list CRDs: %v", err)
	}
	for _, c := range crds.Items {
		established := false
		for _, cond := range c.Status.Conditions {
			if cond.Type == "Established" && cond.Status == "True" {
				established = true
			}
		}
		if !established {
			t.Errorf("CRD %s not Established: %v", c.Name, c.Status.Conditions)
		}
	}
}

// serviceAccountToken creates a ServiceAccount (no controller-manager does it here) and asks
// the TokenRequest API for a token bound to audience, as the kubelet does for a projected
// volume.
func serviceAccountToken(t *testing.T, env *kubetest.Env, ns, name, audience string) string {
	t.Helper()
	ctx := ctxT(t, time.Minute)
	if _, err := env.Client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{
		ObjectMeta: metav1.ObjectMeta{Name: name},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create ServiceAccount %s/%s: %v", ns, name, err)
	}
	exp := int64(3600)
	tr, err := env.Client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authnv1.TokenRequest{
		Spec: authnv1.TokenRequestSpec{Audiences: []string{audience}, ExpirationSeconds: &exp},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenRequest for %s/%s: %v", ns, name, err)
	}
	if tr.Status.Token == "" {
		t.Fatal("TokenRequest returned an empty token")
	}
	return tr.Status.Token
}

func review(t *testing.T, env *kubetest.Env, token string, audiences ...string) authnv1.TokenReviewStatus {
	t.Helper()
	r, err := env.Client.AuthenticationV1().TokenReviews().Create(ctxT(t, time.Minute), &authnv1.TokenReview{
		Spec: authnv1.TokenReviewSpec{Token: token, Audiences: audiences},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenReview: %v", err)
	}
	return r.Status
}

func checkAuthenticated(t *testing.T, st authnv1.TokenReviewStatus, ns, sa string) {
	t.Helper()
	if !st.Authenticated {
		t.Fatalf("token not authenticated: %q", st.Error)
	}
	if want := fmt.Sprintf("system:serviceaccount:%s:%s", ns, sa); st.User.Username != want {
		t.Fatalf("username = %q, want %q", st.User.Username, want)
	}
	if !slices.Contains(st.Audiences, identityAudience) {
		t.Fatalf("audiences = %v, want %s among them", st.Audiences, identityAudience)
	}
	if !slices.Contains(st.User.Groups, "system:serviceaccounts:"+ns) {
		t.Fatalf("groups = %v, want system:serviceaccounts:%s", st.User.Groups, ns)
	}
}

// TestTokenReview is the path the identity component takes: a proxy presents a ServiceAccount
// token bound to identity.l5d.io, and identity asks the API server who it belongs to.
func TestTokenReview(t *testing.T) {
	env := kubetest.Start(t)
	ns := env.Namespace(t, nil)
	token := serviceAccountToken(t, env, ns, "web", identityAudience)

	checkAuthenticated(t, review(t, env, token, identityAudience), ns, "web")

	// Bound to identity.l5d.io, the token is no good for any other audience...
	if st := review(t, env, token, "other.example.com"); st.Authenticated {
		t.Fatalf("token authenticated for a foreign audience: %+v", st.User)
	}
	// ...and a forged or mangled token is rejected, not an error of the review itself.
	if st := review(t, env, token[:len(token)-4]+"AAAA", identityAudience); st.Authenticated {
		t.Fatalf("mangled token authenticated as %q", st.User.Username)
	}
	if st := review(t, env, "not-a-jwt", identityAudience); st.Authenticated {
		t.Fatalf("garbage token authenticated as %q", st.User.Username)
	}
	// Deleting the ServiceAccount revokes its tokens (once the API server's short-lived
	// authentication cache, 10 s, has forgotten the earlier success).
	if err := env.Client.CoreV1().ServiceAccounts(ns).Delete(ctxT(t, time.Minute), "web", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete ServiceAccount: %v", err)
	}
	testutil.EventuallyEvery(t, 45*time.Second, 500*time.Millisecond, "the token of a deleted ServiceAccount to be refused", func() bool {
		return !review(t, env, token, identityAudience).Authenticated
	})
}

// TestRestartInformerResyncs restarts the API server under a running informer: the watch is
// cut, the informer must re-establish it by itself and deliver objects created afterwards.
// Clients, certificates and ServiceAccount tokens issued before the restart stay valid.
func TestRestartInformerResyncs(t *testing.T) {
	env := kubetest.Start(t)
	ns := env.Namespace(t, nil)
	token := serviceAccountToken(t, env, ns, "survivor", identityAudience)

	added := make(chan string, 64)
	ctx, cancel := context.WithCancel(context.Background())
	factory := informers.NewSharedInformerFactoryWithOptions(env.Client, 0, informers.WithNamespace(ns))
	inf := factory.Core().V1().ConfigMaps().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if cm, ok := obj.(*corev1.ConfigMap); ok {
				select {
				case added <- cm.Name:
				case <-ctx.Done():
				}
			}
		},
	}); err != nil {
		t.Fatalf("add handler: %v", err)
	}
	factory.Start(ctx.Done())
	t.Cleanup(func() {
		cancel()
		factory.Shutdown() // waits for the informer's goroutines
	})
	syncCtx := ctxT(t, time.Minute)
	if !cache.WaitForCacheSync(syncCtx.Done(), inf.HasSynced) {
		t.Fatal("informer did not sync within a minute")
	}

	create := func(name string) {
		t.Helper()
		if _, err := env.Client.CoreV1().ConfigMaps(ns).Create(ctxT(t, time.Minute), &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: name},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create ConfigMap %s: %v", name, err)
		}
	}
	waitAdded := func(name string, within time.Duration) {
		t.Helper()
		deadline := time.After(within)
		for {
			select {
			case got := <-added:
				if got == name {
					return
				}
			case <-deadline:
				t.Fatalf("informer did not deliver ConfigMap %s within %v", name, within)
			}
		}
	}

	create("before")
	waitAdded("before", 30*time.Second)

	start := time.Now()
	env.Restart(t)
	t.Logf("API server restarted in %v", time.Since(start).Round(time.Millisecond))

	// The same client (same TLS config, same client certificate) works after the restart.
	create("after")
	// The reflector backs off after the cut watch (at most ~30 s between attempts).
	waitAdded("after", 90*time.Second)
	if _, err := factory.Core().V1().ConfigMaps().Lister().ConfigMaps(ns).Get("before"); err != nil {
		t.Fatalf("lister lost ConfigMap before across the restart: %v", err)
	}

	// The ServiceAccount signing key survived the restart: the old token still reviews.
	checkAuthenticated(t, review(t, env, token, identityAudience), ns, "survivor")
}

// fakeTB records what Start does when the binaries are absent, without ending the real test.
type fakeTB struct {
	testing.TB
	skipped, failed string
}

func (f *fakeTB) Helper() {}
func (f *fakeTB) Skip(args ...any) {
	f.skipped = fmt.Sprint(args...)
	runtime.Goexit()
}
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.failed = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func startWithFake(t *testing.T) *fakeTB {
	t.Helper()
	f := &fakeTB{TB: t}
	// Start ends its goroutine (runtime.Goexit) through f's Skip or Fatalf.
	testutil.Wait(t, 30*time.Second, "Start to return with no binaries", func() { kubetest.Start(f) })
	return f
}

func TestAbsentBinariesSkipUnlessRequired(t *testing.T) {
	t.Setenv("KUBEBUILDER_ASSETS", t.TempDir())
	if ok, why := kubetest.Available(); ok || !strings.Contains(why, "make kube-bin") {
		t.Fatalf("Available() = %v, %q; want false and a hint to run make kube-bin", ok, why)
	}

	for _, v := range []string{"", "0", "false"} {
		t.Setenv("MERIDIAN_REQUIRE_KUBE", v)
		if kubetest.Required() {
			t.Fatalf("Required() with MERIDIAN_REQUIRE_KUBE=%q", v)
		}
		if f := startWithFake(t); f.skipped == "" || f.failed != "" {
			t.Fatalf("MERIDIAN_REQUIRE_KUBE=%q: skipped %q failed %q, want a skip", v, f.skipped, f.failed)
		}
	}

	t.Setenv("MERIDIAN_REQUIRE_KUBE", "1")
	if !kubetest.Required() {
		t.Fatal("Required() false with MERIDIAN_REQUIRE_KUBE=1")
	}
	if f := startWithFake(t); f.failed == "" || f.skipped != "" {
		t.Fatalf("MERIDIAN_REQUIRE_KUBE=1: skipped %q failed %q, want a failure", f.skipped, f.failed)
	}
	if f := startWithFake(t); !strings.Contains(f.failed, "MERIDIAN_REQUIRE_KUBE") {
		t.Fatalf("failure %q does not name MERIDIAN_REQUIRE_KUBE", f.failed)
	}
}
