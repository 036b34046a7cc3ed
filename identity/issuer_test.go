package identity_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meridian-mesh/meridian/identity"
	"github.com/meridian-mesh/meridian/internal/testutil"
)

func TestLoadRefusesBadIssuer(t *testing.T) {
	p := newPKI(t)
	now := time.Now()
	otherAnchor, otherKey, err := identity.NewCA("root.other", now.Add(-time.Hour), now.Add(time.Hour), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	foreign, foreignKey, err := identity.NewCA("identity.other", now.Add(-time.Hour), now.Add(time.Hour), otherAnchor, otherKey)
	if err != nil {
		t.Fatal(err)
	}
	expired, expiredKey, err := identity.NewCA("identity.expired", now.Add(-48*time.Hour), now.Add(-time.Hour), p.anchor, p.anchorKey)
	if err != nil {
		t.Fatal(err)
	}
	future, futureKey, err := identity.NewCA("identity.future", now.Add(time.Hour), now.Add(48*time.Hour), p.anchor, p.anchorKey)
	if err != nil {
		t.Fatal(err)
	}
	leafKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	leafDER, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "not-a-ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		BasicConstraintsValid: true, IsCA: false,
	}, p.anchor, &leafKey.PublicKey, p.anchorKey)
	if err != nil {
		t.Fatal(err)
	}
	notCA, _ := x509.ParseCertificate(leafDER)
	_, strayKey, _ := identity.NewCA("stray", now.Add(-time.Hour), now.Add(time.Hour), nil, nil)
	// The anchor's key in another certificate, signed by the anchor itself: it chains.
	reissuedDER, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: big.NewInt(9), Subject: pkix.Name{CommonName: "identity.reissued"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}, p.anchor, p.anchorKey.Public(), p.anchorKey)
	if err != nil {
		t.Fatal(err)
	}
	reissued, _ := x509.ParseCertificate(reissuedDER)

	cases := []struct {
		name string
		crt  *x509.Certificate
		key  any
		want string
	}{
		{"does not chain", foreign, foreignKey, "does not chain to the trust anchors"},
		{"not a CA", notCA, leafKey, "is not a CA"},
		{"expired", expired, expiredKey, "expired at"},
		{"not yet valid", future, futureKey, "is not valid before"},
		{"key mismatch", p.issuer, strayKey, "does not match"},
		{"the trust anchor itself", p.anchor, p.anchorKey, "holds a trust anchor's key"},
		{"a certificate for the anchor's key", reissued, p.anchorKey, "holds a trust anchor's key"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			write(t, filepath.Join(dir, identity.FileIssuerCert), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: tc.crt.Raw}))
			der, err := x509.MarshalPKCS8PrivateKey(tc.key)
			if err != nil {
				t.Fatal(err)
			}
			write(t, filepath.Join(dir, identity.FileIssuerKey), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
			write(t, filepath.Join(dir, identity.FileTrustAnchors), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: p.anchor.Raw}))
			svc, err := identity.NewService(identity.DefaultConfig(), &identity.FileSource{IssuerDir: dir}, identity.NewLocalReviewer(&p.tokenKey.PublicKey), identity.Options{})
			if err != nil {
				t.Fatal(err)
			}
			err = svc.Load(context.Background())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Load error %v, want one containing %q", err, tc.want)
			}
			if svc.Ready() == nil {
				t.Error("service reports ready after a refused issuer")
			}
		})
	}
}

func TestLoadMissingFiles(t *testing.T) {
	svc, err := identity.NewService(identity.DefaultConfig(), &identity.FileSource{IssuerDir: t.TempDir()}, fakeReviewer{}, identity.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Load(context.Background()); err == nil || !strings.Contains(err.Error(), "want crt.pem and key.pem, or tls.crt and tls.key") {
		t.Fatalf("Load error %v, want one naming the expected files", err)
	}
}

func TestFileSourceTLSScheme(t *testing.T) {
	p := newPKI(t)
	dir := t.TempDir()
	for from, to := range map[string]string{identity.FileIssuerCert: identity.FileIssuerCertTLS, identity.FileIssuerKey: identity.FileIssuerKeyTLS, identity.FileTrustAnchors: "roots.pem"} {
		b, err := os.ReadFile(filepath.Join(p.dir, from))
		if err != nil {
			t.Fatal(err)
		}
		write(t, filepath.Join(dir, to), b)
	}
	m, err := (&identity.FileSource{IssuerDir: dir, AnchorsFile: filepath.Join(dir, "roots.pem")}).Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	iss, err := identity.LoadIssuer(m, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if !iss.Cert.Equal(p.issuer) {
		t.Fatal("loaded a different issuer")
	}
}

func write(t testing.TB, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// certifiedBy certifies testID and returns the issuer certificate the leaf was signed by.
func certifiedBy(t *testing.T, s *server, p *pki) *x509.Certificate {
	t.Helper()
	rsp, leaf := issue(t, s, p)
	inter, err := x509.ParseCertificate(rsp.GetIntermediateCertificates()[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := leaf.CheckSignatureFrom(inter); err != nil {
		t.Fatalf("leaf not signed by the returned intermediate: %v", err)
	}
	return inter
}

// hasEvent reports whether s recorded an event starting with prefix and containing part.
func hasEvent(s *server, prefix, part string) bool {
	for _, e := range s.events.list() {
		if strings.HasPrefix(e, prefix) && strings.Contains(e, part) {
			return true
		}
	}
	return false
}

func TestIssuerRotationOnDisk(t *testing.T) {
	p := newPKI(t)
	// A long poll interval: only the fsnotify watch can pick the change up in time.
	s := startServer(t, p, serverOpts{cfg: func(c *identity.Config) { c.ReloadInterval = time.Hour }})
	if got := certifiedBy(t, s, p); !got.Equal(p.issuer) {
		t.Fatal("first leaf not signed by the initial issuer")
	}
	// A change written while the watcher (started by Run) is being set up is not seen: the
	// rotation is written again every second until the service serves the latest one.
	var next *x509.Certificate
	actUntil(t, 10*time.Second, "the rotated issuer to be loaded", func() {
		next = p.rotate(t, time.Now().Add(30*24*time.Hour))
	}, func() bool { return next != nil && s.svc.Issuer().Cert.Equal(next) })
	if got := certifiedBy(t, s, p); !got.Equal(next) {
		t.Fatal("leaf after rotation not signed by the new issuer")
	}
	if got := gaugeValue(t, s, "identity_cert_expiration_timestamp_seconds"); got != float64(next.NotAfter.Unix()) {
		t.Errorf("expiry gauge %v, want the new issuer's %v", got, next.NotAfter.Unix())
	}
	testutil.Eventually(t, 5*time.Second, "an IssuerUpdated event", func() bool {
		return hasEvent(s, "Normal IssuerUpdated", "")
	})

	// A bad update (issuer from another anchor) is skipped: the old issuer stays.
	otherAnchor, otherKey, _ := identity.NewCA("root.other", time.Now().Add(-time.Hour), time.Now().Add(time.Hour), nil, nil)
	bad, badKey, _ := identity.NewCA("identity.other", time.Now().Add(-time.Hour), time.Now().Add(time.Hour), otherAnchor, otherKey)
	p.writeIssuer(t, bad, badKey)
	testutil.Eventually(t, 10*time.Second, "an IssuerUpdateSkipped event", func() bool {
		return hasEvent(s, "Warning IssuerUpdateSkipped", "does not chain")
	})
	if !s.svc.Issuer().Cert.Equal(next) {
		t.Fatal("a refused update replaced the issuer")
	}
	if got := certifiedBy(t, s, p); !got.Equal(next) {
		t.Fatal("after a refused update, leaves are not signed by the last good issuer")
	}
}

// pollOnly hides FileSource's watch so that only polling can see changes.
type pollOnly struct{ identity.IssuerSource }

func TestIssuerRotationByPolling(t *testing.T) {
	p := newPKI(t)
	s := startServer(t, p, serverOpts{
		source: pollOnly{&identity.FileSource{IssuerDir: p.dir}},
		cfg:    func(c *identity.Config) { c.ReloadInterval = 50 * time.Millisecond },
	})
	next := p.rotate(t, time.Now().Add(30*24*time.Hour))
	testutil.Eventually(t, 10*time.Second, "the rotated issuer to be polled in", func() bool {
		return s.svc.Issuer().Cert.Equal(next)
	})
}
