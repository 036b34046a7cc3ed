package identity_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	pb "github.com/linkerd/linkerd2-proxy-api/go/identity"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meridian-mesh/meridian/identity"
	"github.com/meridian-mesh/meridian/internal/kubetest"
	"github.com/meridian-mesh/meridian/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.Main(m, kubetest.Main)) }

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
	certify := func(tok []byte) error {
		_, err := s.rpc.Certify(callCtx(t), &pb.CertifyRequest{Identity: webID, Token: tok, CertificateSigningRequest: csr})
		return err
	}
	if err := certify(mint("web", identity.Audience)); err != nil {
		t.Fatalf("Certify with web's token: %v", err)
	}
	err = certify(mint("db", identity.Audience))
	if st := status.Convert(err); st.Code() != codes.FailedPrecondition || !strings.Contains(st.Message(), "does not match") {
		t.Fatalf("Certify web with db's token: %v, want FailedPrecondition", err)
	}
	// A token for the API server's default audience is not for identity.
	err = certify(mint("web"))
	if c := status.Code(err); c != codes.Unauthenticated {
		t.Fatalf("Certify with a token for another audience: %v, want Unauthenticated", err)
	}
	err = certify([]byte("not-a-token"))
	if c := status.Code(err); c != codes.Unauthenticated {
		t.Fatalf("Certify with garbage: %v, want Unauthenticated", err)
	}
}
