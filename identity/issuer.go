package identity

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"time"

	"github.com/meridian-mesh/meridian/internal/quote"
	"github.com/meridian-mesh/meridian/internal/tlsid"
)

// Material is the raw PEM an issuer is loaded from: the issuer certificate (optionally
// followed by further intermediates up to the anchors), its private key, and the trust
// anchor bundle.
type Material struct {
	CertPEM    []byte
	KeyPEM     []byte
	AnchorsPEM []byte
}

// Equal reports whether m and o hold the same bytes.
func (m Material) Equal(o Material) bool {
	return bytes.Equal(m.CertPEM, o.CertPEM) && bytes.Equal(m.KeyPEM, o.KeyPEM) && bytes.Equal(m.AnchorsPEM, o.AnchorsPEM)
}

// Issuer is a validated issuer: a CA certificate that chains to the trust anchors and its
// key. An Issuer never changes after LoadIssuer returns it; reloads build a new one.
type Issuer struct {
	// Cert is the issuer certificate; Chain is Cert followed by any further intermediates,
	// as DER, which is what Certify returns as intermediate_certificates.
	Cert  *x509.Certificate
	Chain [][]byte
	// Anchors holds the trust anchors the issuer was verified against.
	Anchors *x509.CertPool
	// NotAfter is the earliest expiry on the verified path from the issuer to its anchor;
	// no leaf outlives it.
	NotAfter time.Time

	key crypto.Signer
}

// LoadIssuer parses and validates m at time now. It refuses an issuer whose key does not
// match, that is not a CA, that is expired or not yet valid, that is itself a trust anchor, or
// that does not chain to the anchors, with a message saying which.
func LoadIssuer(m Material, now time.Time) (*Issuer, error) {
	certs, err := tlsid.ParseCertificates(m.CertPEM, "certificate")
	if err != nil {
		return nil, fmt.Errorf("issuer certificate: %w", err)
	}
	key, err := parsePrivateKeyPEM(m.KeyPEM)
	if err != nil {
		return nil, fmt.Errorf("issuer key: %w", err)
	}
	anchors, err := tlsid.ParseCertificates(m.AnchorsPEM, "trust anchor")
	if err != nil {
		return nil, fmt.Errorf("trust anchors: %w", err)
	}
	crt := certs[0]
	subj := quote.String(crt.Subject.String()) // a prefix: a subject can be as long as the certificate
	type equaler interface{ Equal(crypto.PublicKey) bool }
	if pub, ok := key.Public().(equaler); !ok || !pub.Equal(crt.PublicKey) {
		return nil, fmt.Errorf("issuer key does not match the issuer certificate %s", subj)
	}
	if !crt.BasicConstraintsValid || !crt.IsCA {
		return nil, fmt.Errorf("issuer certificate %s is not a CA (basic constraints CA=false); it cannot sign workload certificates", subj)
	}
	if crt.KeyUsage != 0 && crt.KeyUsage&x509.KeyUsageCertSign == 0 {
		return nil, fmt.Errorf("issuer certificate %s lacks the certSign key usage", subj)
	}
	if now.After(crt.NotAfter) {
		return nil, fmt.Errorf("issuer certificate %s expired at %s", subj, crt.NotAfter.UTC().Format(time.RFC3339))
	}
	if now.Before(crt.NotBefore) {
		return nil, fmt.Errorf("issuer certificate %s is not valid before %s", subj, crt.NotBefore.UTC().Format(time.RFC3339))
	}
	// The anchor's key is kept offline: the issuer signs, never the trust anchor, which a
	// leaked issuer key would otherwise make of every future trust decision.
	for _, a := range anchors {
		// By key, not by certificate: a certificate re-issued for the anchor's key is the
		// anchor's key all the same.
		if pub, ok := a.PublicKey.(equaler); a.Equal(crt) || ok && pub.Equal(crt.PublicKey) {
			return nil, fmt.Errorf("issuer certificate %s holds a trust anchor's key: sign an issuer with the anchor's key and give the issuer's certificate and key (meridian identity init does)", subj)
		}
	}
	pool := x509.NewCertPool()
	for _, a := range anchors {
		pool.AddCert(a)
	}
	inter := x509.NewCertPool()
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	paths, err := crt.Verify(x509.VerifyOptions{
		Roots:         pool,
		Intermediates: inter,
		CurrentTime:   now,
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageAny},
	})
	if err != nil {
		return nil, fmt.Errorf("issuer certificate %s does not chain to the trust anchors: %w", subj, err)
	}
	// Its leaves serve and present: a chain whose extended key usages leave out either
	// would sign certificates every peer refuses.
	for _, u := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		opts := x509.VerifyOptions{Roots: pool, Intermediates: inter, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{u}}
		if _, err := crt.Verify(opts); err != nil {
			return nil, fmt.Errorf("issuer certificate %s cannot sign %s certificates: %w", subj, extKeyUsageName(u), err)
		}
	}
	notAfter := crt.NotAfter
	for _, c := range paths[0] {
		if c.NotAfter.Before(notAfter) {
			notAfter = c.NotAfter
		}
	}
	chain := make([][]byte, len(certs))
	for i, c := range certs {
		chain[i] = c.Raw
	}
	return &Issuer{Cert: crt, Chain: chain, Anchors: pool, NotAfter: notAfter, key: key}, nil
}

func extKeyUsageName(u x509.ExtKeyUsage) string {
	if u == x509.ExtKeyUsageServerAuth {
		return "server (serverAuth)"
	}
	return "client (clientAuth)"
}

// Probe signs a leaf for identity with a key of its own and verifies it as a peer would:
// to the trust anchors, as a server and as a client, for that name. It finds an issuer that
// LoadIssuer accepts but whose chain constrains names so that its leaves are refused.
func (is *Issuer) Probe(identity string, now time.Time) error {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("probe key: %w", err)
	}
	der, _, err := is.issue(&k.PublicKey, identity, now, time.Minute, 0)
	if err != nil {
		return err
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return fmt.Errorf("probe certificate: %w", err)
	}
	inter := x509.NewCertPool()
	for _, c := range is.Chain {
		if ic, err := x509.ParseCertificate(c); err == nil {
			inter.AddCert(ic)
		}
	}
	opts := x509.VerifyOptions{Roots: is.Anchors, Intermediates: inter, CurrentTime: now, DNSName: identity,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	if _, err := leaf.Verify(opts); err != nil {
		return fmt.Errorf("a certificate it signs for %s does not verify: %w", quote.String(identity), err)
	}
	return nil
}

// ErrIssuerExpired is returned by Issue once the issuer chain has expired.
var ErrIssuerExpired = errors.New("issuer has expired")

// Issue signs a leaf for identity with the public key of csr (already checked by CheckCSR):
// ECDSA, server and client auth, valid from now-skew to min(now+lifetime, issuer NotAfter).
func (is *Issuer) Issue(csr *x509.CertificateRequest, identity string, now time.Time, lifetime, skew time.Duration) (der []byte, notAfter time.Time, err error) {
	return is.issue(csr.PublicKey, identity, now, lifetime, skew)
}

// issue signs a leaf for identity carrying pub, as Issue describes.
func (is *Issuer) issue(pub crypto.PublicKey, identity string, now time.Time, lifetime, skew time.Duration) (der []byte, notAfter time.Time, err error) {
	// x509 keeps whole seconds; truncate so valid_until is exactly the leaf's NotAfter.
	notAfter = now.Add(lifetime).Truncate(time.Second)
	if notAfter.After(is.NotAfter) {
		notAfter = is.NotAfter
	}
	notBefore := now.Add(-skew).Truncate(time.Second)
	if !notAfter.After(now) {
		return nil, time.Time{}, ErrIssuerExpired
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, time.Time{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: identity},
		DNSNames:              []string{identity},
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
	}
	der, err = x509.CreateCertificate(rand.Reader, tmpl, is.Cert, pub, is.key)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("sign certificate for %s: %w", identity, err)
	}
	return der, notAfter, nil
}

func randomSerial() (*big.Int, error) {
	s, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("serial number: %w", err)
	}
	return s.Add(s, big.NewInt(1)), nil
}

// parsePrivateKeyPEM reads the first private key block: PKCS#8, SEC1 EC or PKCS#1 RSA.
func parsePrivateKeyPEM(data []byte) (crypto.Signer, error) {
	rest := data
	for {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			return nil, errors.New("no PEM private key block found")
		}
		var k any
		var err error
		switch b.Type {
		case "PRIVATE KEY":
			k, err = x509.ParsePKCS8PrivateKey(b.Bytes)
		case "EC PRIVATE KEY":
			k, err = x509.ParseECPrivateKey(b.Bytes)
		case "RSA PRIVATE KEY":
			k, err = x509.ParsePKCS1PrivateKey(b.Bytes)
		default:
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("parse %s: %w", b.Type, err)
		}
		s, ok := k.(crypto.Signer)
		if !ok {
			return nil, fmt.Errorf("%T is not a signing key", k)
		}
		return s, nil
	}
}

// encodeECKeyPEM encodes k as a PKCS#8 "PRIVATE KEY" block.
func encodeECKeyPEM(k *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

func encodeCertPEM(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}
