package identity_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	pb "github.com/linkerd/linkerd2-proxy-api/go/identity"
	"google.golang.org/grpc/codes"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"

	"github.com/meridian-mesh/meridian/identity"
	"github.com/meridian-mesh/meridian/internal/kubetest"
	"github.com/meridian-mesh/meridian/internal/testutil"
)

// TestTokenReviewRealAPIServer certifies with ServiceAccount tokens minted by a real API
// server (TokenRequest, audience identity.l5d.io) and reviewed by it (TokenReview), and
// reads the issuer from a real Secret and ConfigMap.
func TestTokenReviewRealAPIServer(t *testing.T) {
	env := kubetest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ns := env.Namespace(t, nil)
	for _, sa := range []string{"web", "db"} {
		if _, err := env.Client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	mint := func(sa string, aud ...string) []byte {
		exp := int64(600)
		tr, err := env.Client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authnv1.TokenRequest{
			Spec: authnv1.TokenRequestSpec{Audiences: aud, ExpirationSeconds: &exp},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("TokenRequest for %s: %v", sa, err)
		}
		return []byte(tr.Status.Token)
	}

	if err := identity.CheckTokenReviewAccess(ctx, env.Client); err != nil {
		t.Fatalf("admin may not create TokenReviews: %v", err)
	}

	// The issuer comes from a real Secret and ConfigMap in the "control plane" namespace.
	p := newPKI(t)
	m, err := (&identity.FileSource{IssuerDir: p.dir}).Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cp := env.Namespace(t, nil)
	if _, err := env.Client.CoreV1().Secrets(cp).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: identity.IssuerSecretName},
		Data: map[string][]byte{identity.FileIssuerCert: m.CertPEM, identity.FileIssuerKey: m.KeyPEM}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Client.CoreV1().ConfigMaps(cp).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: identity.TrustRootsConfigMap},
		Data: map[string]string{identity.FileTrustAnchors: string(m.AnchorsPEM)}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, p, serverOpts{
		source:   &identity.KubeSource{Client: env.Client, Namespace: cp},
		reviewer: identity.NewKubeReviewer(env.Client),
		cfg:      func(c *identity.Config) { c.ControlPlaneNamespace = cp },
	})

	webID := identity.ServiceAccountIdentity(ns, "web", cp, "cluster.local")
	csr := makeCSR(t, csrSpec{dns: []string{webID}})
	for _, tc := range []struct {
		name  string
		token []byte
		code  codes.Code
		msg   string
	}{
		{"web's token", mint("web", identity.Audience), codes.OK, ""},
		{"db's token", mint("db", identity.Audience), codes.FailedPrecondition, "does not match"},
		// A token for the API server's default audience is not for identity.
		{"a token for another audience", mint("web"), codes.Unauthenticated, ""},
		{"garbage", []byte("not-a-token"), codes.Unauthenticated, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.certify(t, &pb.CertifyRequest{Identity: webID, Token: tc.token, CertificateSigningRequest: csr})
			testutil.WantStatus(t, err, tc.code, tc.msg)
		})
	}
}

// tokenReviewAPI serves POST /apis/authentication.k8s.io/v1/tokenreviews the way the API
// server answers, for a fixed set of tokens.
func tokenReviewAPI(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/apis/authentication.k8s.io/v1/tokenreviews" {
			http.Error(w, "not found", http.StatusNotFound)
			return
		}
		if ct := r.Header.Get("Content-Type"); ct != "application/json" {
			http.Error(w, "test API: JSON only, got "+ct, http.StatusUnsupportedMediaType)
			return
		}
		var tr authnv1.TokenReview
		if err := json.NewDecoder(r.Body).Decode(&tr); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if !slices.Equal(tr.Spec.Audiences, []string{identity.Audience}) {
			http.Error(w, "test API: request must carry audience identity.l5d.io", http.StatusBadRequest)
			return
		}
		tr.APIVersion, tr.Kind = "authentication.k8s.io/v1", "TokenReview"
		switch tr.Spec.Token {
		case "web-token":
			tr.Status = authnv1.TokenReviewStatus{Authenticated: true, Audiences: []string{identity.Audience},
				User: authnv1.UserInfo{Username: "system:serviceaccount:" + testNS + ":" + testSA}}
		case "expired-token":
			tr.Status = authnv1.TokenReviewStatus{Error: "[invalid bearer token, service account token has expired]"}
		case "other-audience":
			tr.Status = authnv1.TokenReviewStatus{Authenticated: true, Audiences: []string{"https://kubernetes.default.svc"},
				User: authnv1.UserInfo{Username: "system:serviceaccount:" + testNS + ":" + testSA}}
		case "node-token":
			tr.Status = authnv1.TokenReviewStatus{Authenticated: true, Audiences: []string{identity.Audience},
				User: authnv1.UserInfo{Username: "system:node:worker-1"}}
		case "server-error":
			http.Error(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"etcdserver: request timed out","code":500}`, http.StatusInternalServerError)
			return
		default:
			tr.Status = authnv1.TokenReviewStatus{Authenticated: false}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(&tr)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestKubeReviewerOverHTTP(t *testing.T) {
	api := tokenReviewAPI(t)
	// This stand-in API server speaks JSON only (a real one also speaks protobuf and CBOR).
	client, err := kubernetes.NewForConfig(&rest.Config{Host: api.URL, ContentConfig: rest.ContentConfig{
		ContentType: "application/json", AcceptContentTypes: "application/json",
	}})
	if err != nil {
		t.Fatal(err)
	}
	p := newPKI(t)
	s := startServer(t, p, serverOpts{reviewer: identity.NewKubeReviewer(client)})
	csr := makeCSR(t, csrSpec{dns: []string{testID}})
	for _, tc := range []struct {
		token string
		code  codes.Code
		msg   string
	}{
		{"web-token", codes.OK, ""},
		{"expired-token", codes.Unauthenticated, "has expired"},
		{"other-audience", codes.Unauthenticated, "not \"identity.l5d.io\""},
		{"unknown-token", codes.Unauthenticated, "could not be authenticated"},
		{"node-token", codes.FailedPrecondition, "system:serviceaccount:NS:SA"},
		{"server-error", codes.Unavailable, "token review failed"},
	} {
		t.Run(tc.token, func(t *testing.T) {
			_, err := s.certify(t, &pb.CertifyRequest{Identity: testID, Token: []byte(tc.token), CertificateSigningRequest: csr})
			testutil.WantStatus(t, err, tc.code, tc.msg)
		})
	}
}

func TestKubeSourceReadsSecretAndConfigMap(t *testing.T) {
	p := newPKI(t)
	m, err := (&identity.FileSource{IssuerDir: p.dir}).Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, scheme := range []struct {
		name     string
		typ      corev1.SecretType
		crt, key string
	}{
		{"linkerd", "", identity.FileIssuerCert, identity.FileIssuerKey},
		{"kubernetes.io/tls", corev1.SecretTypeTLS, identity.FileIssuerCertTLS, identity.FileIssuerKeyTLS},
	} {
		t.Run(scheme.name, func(t *testing.T) {
			client := fake.NewClientset(
				&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: identity.IssuerSecretName, Namespace: "linkerd"}, Type: scheme.typ,
					Data: map[string][]byte{scheme.crt: m.CertPEM, scheme.key: m.KeyPEM}},
				&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: identity.TrustRootsConfigMap, Namespace: "linkerd"},
					Data: map[string]string{identity.FileTrustAnchors: string(m.AnchorsPEM)}},
			)
			got, err := (&identity.KubeSource{Client: client, Namespace: "linkerd"}).Load(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if !got.Equal(m) {
				t.Fatal("material read from Kubernetes differs from the files")
			}
		})
	}
	_, err = (&identity.KubeSource{Client: fake.NewClientset(), Namespace: "linkerd"}).Load(context.Background())
	if err == nil || !strings.Contains(err.Error(), "linkerd/linkerd-identity-issuer") {
		t.Fatalf("missing Secret: error %v, want one naming it", err)
	}
}

func TestKubeSourceWatchPicksUpRotation(t *testing.T) {
	p := newPKI(t)
	m, err := (&identity.FileSource{IssuerDir: p.dir}).Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	client := fake.NewClientset(
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: identity.IssuerSecretName, Namespace: "linkerd"},
			Data: map[string][]byte{identity.FileIssuerCert: m.CertPEM, identity.FileIssuerKey: m.KeyPEM}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: identity.TrustRootsConfigMap, Namespace: "linkerd"},
			Data: map[string]string{identity.FileTrustAnchors: string(m.AnchorsPEM)}},
	)
	// A long poll interval: only the watch can pick the change up in time.
	s := startServer(t, p, serverOpts{
		source: &identity.KubeSource{Client: client, Namespace: "linkerd"},
		cfg:    func(c *identity.Config) { c.ReloadInterval = time.Hour },
	})
	next := p.rotate(t, time.Now().Add(30*24*time.Hour))
	nm, err := (&identity.FileSource{IssuerDir: p.dir}).Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// KubeSource.Watch reloads once its watches are set up, so an update that lands before
	// then is seen too; the update is repeated all the same until the new issuer is in use.
	actUntil(t, 10*time.Second, "the rotated issuer Secret to be loaded", func() {
		sec, err := client.CoreV1().Secrets("linkerd").Get(context.Background(), identity.IssuerSecretName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		sec.Data = map[string][]byte{identity.FileIssuerCert: nm.CertPEM, identity.FileIssuerKey: nm.KeyPEM}
		sec.ResourceVersion = ""
		if _, err := client.CoreV1().Secrets("linkerd").Update(context.Background(), sec, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}, func() bool { return s.svc.Issuer().Cert.Equal(next) })
}
