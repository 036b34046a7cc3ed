package testutil

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"sync/atomic"
	"testing"
	"time"
)

// PKI is a mesh PKI shaped like a Linkerd install: a self-signed trust anchor, an issuer
// (intermediate CA) it signs, and leaf certificates the issuer mints for identities, as the
// identity service does (ECDSA P-256, the identity as DNS SAN and common name, server and
// client authentication, the issuer in the chain).
type PKI struct {
	Anchor        *x509.Certificate // the trust anchor
	Issuer        *x509.Certificate // the intermediate that signs the leaves
	Roots         *x509.CertPool    // the anchor alone: what a proxy trusts
	Intermediates *x509.CertPool    // the issuer alone
	issuerKey     *ecdsa.PrivateKey
}

var serials atomic.Int64

// NewPKI makes a PKI valid from an hour ago to an hour from now.
func NewPKI(t testing.TB) *PKI {
	t.Helper()
	now := time.Now()
	anchorKey := newKey(t)
	anchor := sign(t, &x509.Certificate{
		Subject:   pkix.Name{CommonName: "root.linkerd.cluster.local"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, MaxPathLen: 1,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}, nil, anchorKey, anchorKey)
	issuerKey := newKey(t)
	issuer := sign(t, &x509.Certificate{
		Subject:   pkix.Name{CommonName: "identity.linkerd.cluster.local"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, MaxPathLenZero: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}, anchor, anchorKey, issuerKey)
	roots, intermediates := x509.NewCertPool(), x509.NewCertPool()
	roots.AddCert(anchor)
	intermediates.AddCert(issuer)
	return &PKI{Anchor: anchor, Issuer: issuer, Roots: roots, Intermediates: intermediates, issuerKey: issuerKey}
}

// AnchorPEM returns the trust anchor as a PEM bundle, as the ConfigMap
// linkerd-identity-trust-roots holds it.
func (p *PKI) AnchorPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: p.Anchor.Raw})
}

// Leaf mints a certificate for identity, valid from a minute ago for an hour; its chain is
// the leaf and the issuer, and Leaf is set.
func (p *PKI) Leaf(t testing.TB, identity string) *tls.Certificate {
	t.Helper()
	now := time.Now()
	key := newKey(t)
	leaf := sign(t, &x509.Certificate{
		Subject: pkix.Name{CommonName: identity}, DNSNames: []string{identity},
		NotBefore: now.Add(-time.Minute), NotAfter: now.Add(time.Hour),
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}, p.Issuer, p.issuerKey, key)
	return &tls.Certificate{Certificate: [][]byte{leaf.Raw, p.Issuer.Raw}, PrivateKey: key, Leaf: leaf}
}

// StaticCert serves one certificate to both sides of TLS: it has the methods of
// tls.Config's GetCertificate and GetClientCertificate (and so is an internal/tlsid Certs).
type StaticCert struct{ Cert *tls.Certificate }

// GetCertificate returns the certificate.
func (s StaticCert) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return s.Cert, nil
}

// GetClientCertificate returns the certificate.
func (s StaticCert) GetClientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	return s.Cert, nil
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("generate a key: %v", err)
	}
	return key
}

// sign signs tmpl with parentKey as parent (itself when parent is nil) for key's public key.
func sign(t testing.TB, tmpl, parent *x509.Certificate, parentKey, key *ecdsa.PrivateKey) *x509.Certificate {
	t.Helper()
	tmpl.SerialNumber = big.NewInt(serials.Add(1))
	if parent == nil {
		parent = tmpl
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatalf("sign a certificate for %s: %v", tmpl.Subject.CommonName, err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("parse the certificate for %s: %v", tmpl.Subject.CommonName, err)
	}
	return c
}
