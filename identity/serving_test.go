package identity_test

import (
	"crypto/ecdsa"
	"crypto/x509"
	"testing"
	"time"

	"github.com/meridian-mesh/meridian/identity"
	"github.com/meridian-mesh/meridian/internal/testutil"
)

var identitySvcID = identity.ServiceAccountIdentity("linkerd", "linkerd-identity", "linkerd", "cluster.local")

// newServingCert returns the serving certificate of s, running until the test ends.
func newServingCert(t *testing.T, s *server) *identity.ServingCert {
	t.Helper()
	sc, err := identity.NewServingCert(s.svc, identitySvcID, nil)
	if err != nil {
		t.Fatal(err)
	}
	testutil.Go(t, "the serving certificate", sc.Run)
	return sc
}

// verifies checks that leaf names the identity service and chains to anchors through chain.
func verifies(t *testing.T, sc *identity.ServingCert, anchors *x509.CertPool) *x509.Certificate {
	t.Helper()
	crt := sc.Certificate()
	inter := x509.NewCertPool()
	for _, der := range crt.Certificate[1:] {
		c, err := x509.ParseCertificate(der)
		if err != nil {
			t.Fatal(err)
		}
		inter.AddCert(c)
	}
	if _, err := crt.Leaf.Verify(x509.VerifyOptions{Roots: anchors, Intermediates: inter, DNSName: identitySvcID,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		t.Fatalf("the serving certificate does not verify as %s: %v", identitySvcID, err)
	}
	return crt.Leaf
}

// TestServingCertRenewsBeforeExpiry: with 3 s certificates, the identity service's own
// certificate is re-issued (by its issuer, with the same key) while the previous one is still
// valid.
func TestServingCertRenewsBeforeExpiry(t *testing.T) {
	p := newPKI(t)
	s := startServer(t, p, serverOpts{cfg: func(c *identity.Config) { c.Lifetime, c.ClockSkew = 3*time.Second, 0 }})
	sc := newServingCert(t, s)
	if err := sc.Ready(); err != nil {
		t.Fatalf("not ready with its first certificate: %v", err)
	}
	first := verifies(t, sc, p.anchors)
	testutil.Eventually(t, 10*time.Second, "a second certificate", func() bool { return sc.Issued() >= 2 })
	second := verifies(t, sc, p.anchors)
	if arrived := time.Now(); !arrived.Before(first.NotAfter.Add(time.Second)) {
		t.Errorf("renewed at %v, after the first certificate expired at %v", arrived, first.NotAfter)
	}
	if second.Equal(first) || !second.PublicKey.(*ecdsa.PublicKey).Equal(first.PublicKey) {
		t.Error("renewal must issue a new certificate for the same key")
	}
}

// TestServingCertFollowsTheIssuer: when the issuer is replaced, the identity service's own
// certificate is re-issued by the new one at once (its 24 h renewal is far away).
func TestServingCertFollowsTheIssuer(t *testing.T) {
	p := newPKI(t)
	s := startServer(t, p, serverOpts{cfg: func(c *identity.Config) { c.ReloadInterval = 100 * time.Millisecond }})
	sc := newServingCert(t, s)
	if leaf := verifies(t, sc, p.anchors); leaf.CheckSignatureFrom(p.issuer) != nil {
		t.Fatal("the first certificate is not signed by the issuer")
	}
	next := p.rotate(t, time.Now().Add(48*time.Hour))
	testutil.Eventually(t, 10*time.Second, "a certificate from the new issuer", func() bool {
		return sc.Certificate().Leaf.CheckSignatureFrom(next) == nil
	})
	verifies(t, sc, p.anchors)
}

func TestServingCertRefusesBadNames(t *testing.T) {
	p := newPKI(t)
	svc := loadedService(t, p)
	for _, name := range []string{"", "Not A Name", "a..b"} {
		if _, err := identity.NewServingCert(svc, name, nil); err == nil {
			t.Errorf("NewServingCert(%q) succeeded", name)
		}
	}
	unloaded, err := identity.NewService(identity.DefaultConfig(), &identity.FileSource{IssuerDir: p.dir}, identity.NewLocalReviewer(&p.tokenKey.PublicKey), identity.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := identity.NewServingCert(unloaded, identitySvcID, nil); err == nil {
		t.Error("NewServingCert succeeded without an issuer")
	}
}
