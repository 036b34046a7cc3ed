package client

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"testing"
	"time"

	pb "github.com/linkerd/linkerd2-proxy-api/go/identity"
)

// TestCheckWantsExactlyOurName: a leaf counts only when its one DNS name is exactly the
// identity asked for and it is no CA. A hostname match used to accept a wildcard, the name
// in other case, the name among others, and a CA; a leaf for one side of mTLS only passed.
func TestCheckWantsExactlyOurName(t *testing.T) {
	const id = "web.emojivoto.serviceaccount.identity.linkerd.cluster.local"
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "root"}, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	cfg := DefaultConfig()
	cfg.Identity, cfg.TrustAnchors = id, pool
	c, err := New(cfg, nil, StaticToken([]byte("t")), nil)
	if err != nil {
		t.Fatal(err)
	}
	both := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	for _, tc := range []struct {
		name string
		dns  []string
		isCA bool
		eku  []x509.ExtKeyUsage
		ok   bool
	}{
		{"exactly ours", []string{id}, false, both, true},
		{"wildcard", []string{"*.emojivoto.serviceaccount.identity.linkerd.cluster.local"}, false, both, false},
		{"other case", []string{"WEB.emojivoto.serviceaccount.identity.linkerd.cluster.local"}, false, both, false},
		{"ours among others", []string{"db.emojivoto.serviceaccount.identity.linkerd.cluster.local", id}, false, both, false},
		{"a CA", []string{id}, true, both, false},
		// The certificate serves both sides of mTLS: one for either side alone is refused.
		{"server authentication only", []string{id}, false, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, false},
		{"client authentication only", []string{id}, false, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), NotBefore: now.Add(-time.Minute), NotAfter: now.Add(time.Hour), DNSNames: tc.dns,
				ExtKeyUsage: tc.eku, BasicConstraintsValid: true, IsCA: tc.isCA}
			der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &c.key.PublicKey, caKey)
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.check(&pb.CertifyResponse{LeafCertificate: der}, now)
			if (err == nil) != tc.ok {
				t.Fatalf("check: %v, want accepted %v", err, tc.ok)
			}
		})
	}
}
