package identity_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/meridian-mesh/meridian/identity"
	"github.com/meridian-mesh/meridian/internal/testutil"
)

// TestNotYetValidIssuerTakenOnceValid: an issuer refused because it is not valid yet (its
// signer's clock ran ahead) is checked again at each poll and taken once it is valid, with
// one skip event meanwhile. The files used to be remembered as refused for good, and the
// service kept the old issuer until it expired.
func TestNotYetValidIssuerTakenOnceValid(t *testing.T) {
	p := newPKI(t)
	var clock atomic.Int64
	clock.Store(time.Now().UnixNano())
	now := func() time.Time { return time.Unix(0, clock.Load()) }
	cfg := identity.DefaultConfig()
	cfg.ReloadInterval = 20 * time.Millisecond
	ev := &events{}
	svc, err := identity.NewService(cfg, pollOnly{&identity.FileSource{IssuerDir: p.dir}},
		identity.NewLocalReviewer(&p.tokenKey.PublicKey), identity.Options{Logger: zaptest.NewLogger(t), Events: ev, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	testutil.Go(t, "the reload loop", svc.Run)
	crt, key, err := identity.NewCA("identity.linkerd.cluster.local", now().Add(30*time.Second), now().Add(48*time.Hour), p.anchor, p.anchorKey)
	if err != nil {
		t.Fatal(err)
	}
	p.writeIssuer(t, crt, key)
	testutil.Eventually(t, 10*time.Second, "the not-yet-valid issuer refused", func() bool { return len(ev.list()) > 0 })
	time.Sleep(100 * time.Millisecond) // polls that find the same files, refused for the same reason
	if got := ev.list(); len(got) != 1 || !strings.Contains(got[0], "not valid before") {
		t.Fatalf("events %q, want one skip saying why", got)
	}
	clock.Add(int64(time.Minute))
	testutil.Eventually(t, 10*time.Second, "the issuer taken once valid", func() bool { return svc.Issuer().Cert.Equal(crt) })
}

// TestIssuerThatSignsUnusableLeavesRefused: an issuer whose chain would make every leaf it
// signs fail a peer's verification is refused, and the previous one stays: extended key
// usages without serverAuth, or name constraints that leave out the mesh's names. Both used
// to be installed.
func TestIssuerThatSignsUnusableLeavesRefused(t *testing.T) {
	for _, c := range []struct {
		name string
		mod  func(*x509.Certificate)
		want string
	}{
		{"clientAuth only", func(c *x509.Certificate) { c.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth} }, "cannot sign server"},
		{"names of another domain", func(c *x509.Certificate) { c.PermittedDNSDomains = []string{"example.org"} }, "does not verify"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := newPKI(t)
			s := startServer(t, p, serverOpts{cfg: func(c *identity.Config) { c.ReloadInterval = 50 * time.Millisecond }})
			ev := s.events
			first := s.svc.Issuer().Cert
			k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
			if err != nil {
				t.Fatal(err)
			}
			tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "identity.linkerd.cluster.local"},
				NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
				KeyUsage: x509.KeyUsageCertSign}
			c.mod(tmpl)
			der, err := x509.CreateCertificate(rand.Reader, tmpl, p.anchor, &k.PublicKey, p.anchorKey)
			if err != nil {
				t.Fatal(err)
			}
			crt, err := x509.ParseCertificate(der)
			if err != nil {
				t.Fatal(err)
			}
			p.writeIssuer(t, crt, k)
			testutil.Eventually(t, 10*time.Second, "the update refused", func() bool { return len(ev.list()) > 0 })
			if got := ev.list()[0]; !strings.Contains(got, c.want) {
				t.Fatalf("event %q, want it to say %q", got, c.want)
			}
			if !s.svc.Issuer().Cert.Equal(first) {
				t.Fatal("the refused issuer replaced the first")
			}
		})
	}
}
