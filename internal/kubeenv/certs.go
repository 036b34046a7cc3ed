package kubeenv

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// The files of an Env's directory that the API server reads.
const (
	servingCertFile = "apiserver.crt"
	servingKeyFile  = "apiserver.key"
	clientCAFile    = "client-ca.crt"
	saPublicFile    = "sa-signer.pub"
	saKeyFile       = "sa-signer.key"
)

// certLifetime is how long the generated certificates are valid: longer than any run.
const certLifetime = 7 * 24 * time.Hour

// pair is a certificate and its key.
type pair struct {
	cert *x509.Certificate
	der  []byte
	key  *ecdsa.PrivateKey
}

func (p pair) certPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: p.der})
}

func (p pair) keyPEM() ([]byte, error) {
	b, err := x509.MarshalPKCS8PrivateKey(p.key)
	if err != nil {
		return nil, fmt.Errorf("encode a private key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: b}), nil
}

// newPair makes a P-256 key and a certificate for it from tmpl, signed by parent (nil: self-signed).
func newPair(tmpl *x509.Certificate, parent *pair) (pair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return pair{}, fmt.Errorf("generate a key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return pair{}, err
	}
	now := time.Now()
	tmpl.SerialNumber = serial
	tmpl.NotBefore, tmpl.NotAfter = now.Add(-time.Minute).UTC(), now.Add(certLifetime).UTC()
	signerCert, signerKey := tmpl, crypto.Signer(key)
	if parent != nil {
		signerCert, signerKey = parent.cert, parent.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signerCert, key.Public(), signerKey)
	if err != nil {
		return pair{}, fmt.Errorf("create certificate %q: %w", tmpl.Subject.CommonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return pair{}, err
	}
	return pair{cert: cert, der: der, key: key}, nil
}

func newCA(name string) (pair, error) {
	return newPair(&x509.Certificate{
		Subject:               pkix.Name{CommonName: name, Organization: []string{"meridian-kubeenv"}},
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}, nil)
}

// credentials are what clients of the API server need: its CA and an admin certificate.
type credentials struct {
	caPEM, certPEM, keyPEM []byte
}

// writeCerts writes the API server's serving certificate (for 127.0.0.1, ::1 and localhost),
// the client CA, and the ServiceAccount signing key into dir, and returns the credentials of
// an admin (CN admin, O system:masters).
func writeCerts(dir string) (credentials, error) {
	var c credentials
	servingCA, err := newCA("kubeenv-serving-ca")
	if err != nil {
		return c, err
	}
	serving, err := newPair(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "localhost"},
		DNSNames:    []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, &servingCA)
	if err != nil {
		return c, err
	}
	clientCA, err := newCA("kubeenv-client-ca")
	if err != nil {
		return c, err
	}
	admin, err := newPair(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "admin", Organization: []string{"system:masters"}},
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, &clientCA)
	if err != nil {
		return c, err
	}
	// The ServiceAccount token signer: a key, and a certificate of its public half (the API
	// server reads either form from --service-account-key-file).
	sa, err := newCA("kubeenv-service-accounts")
	if err != nil {
		return c, err
	}
	servingKey, err := serving.keyPEM()
	if err != nil {
		return c, err
	}
	saKey, err := sa.keyPEM()
	if err != nil {
		return c, err
	}
	files := []struct {
		name string
		data []byte
	}{
		{servingCertFile, serving.certPEM()},
		{servingKeyFile, servingKey},
		{clientCAFile, clientCA.certPEM()},
		{saPublicFile, sa.certPEM()},
		{saKeyFile, saKey},
	}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(dir, f.name), f.data, 0o600); err != nil {
			return c, fmt.Errorf("write %s: %w", f.name, err)
		}
	}
	c.caPEM, c.certPEM = servingCA.certPEM(), admin.certPEM()
	if c.keyPEM, err = admin.keyPEM(); err != nil {
		return c, err
	}
	return c, nil
}
