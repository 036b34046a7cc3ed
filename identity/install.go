package identity

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// File names of an install directory, as in Linkerd's Secret and ConfigMap.
const (
	FileTrustAnchors   = "ca-bundle.crt"    // trust anchor bundle (ConfigMap linkerd-identity-trust-roots)
	FileIssuerCert     = "crt.pem"          // issuer certificate (Secret linkerd-identity-issuer)
	FileIssuerKey      = "key.pem"          // issuer key
	FileIssuerCertTLS  = "tls.crt"          // issuer certificate, kubernetes.io/tls scheme
	FileIssuerKeyTLS   = "tls.key"          // issuer key, kubernetes.io/tls scheme
	FileTrustAnchorKey = "trust-anchor.key" // written by init only; never read by the server
	FileLocalTokenKey  = "token-key.pem"    // local mesh token signing key
)

// NewCA returns a new ECDSA P-256 CA certificate for cn valid from notBefore to notAfter,
// signed by parent/parentKey, or self-signed when parent is nil.
func NewCA(cn string, notBefore, notAfter time.Time, parent *x509.Certificate, parentKey crypto.Signer) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLen:            1,
	}
	signer := crypto.Signer(key)
	if parent == nil {
		parent = tmpl
	} else {
		tmpl.MaxPathLen, tmpl.MaxPathLenZero = 0, true
		signer = parentKey
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, signer)
	if err != nil {
		return nil, nil, fmt.Errorf("create certificate %s: %w", cn, err)
	}
	crt, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, err
	}
	return crt, key, nil
}

// GeneratedInstall is the material for a new install.
type GeneratedInstall struct {
	Material              // anchors, issuer certificate and issuer key
	AnchorKeyPEM   []byte // the trust anchor's key: keep it offline, the server never needs it
	LocalTokenKey  []byte // PEM signing key for local-mesh tokens, when asked for
	IssuerNotAfter time.Time
}

// GenerateInstall makes a self-signed trust anchor root.CPNS.TD and an issuer
// identity.CPNS.TD signed by it, both valid for validity from now (minus a minute of skew).
func GenerateInstall(trustDomain, controlPlaneNS string, validity time.Duration, now time.Time, localTokenKey bool) (*GeneratedInstall, error) {
	if validity <= 0 {
		return nil, errors.New("validity must be positive")
	}
	nb, na := now.Add(-time.Minute), now.Add(validity)
	anchor, anchorKey, err := NewCA("root."+controlPlaneNS+"."+trustDomain, nb, na, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("trust anchor: %w", err)
	}
	issuer, issuerKey, err := NewCA("identity."+controlPlaneNS+"."+trustDomain, nb, na, anchor, anchorKey)
	if err != nil {
		return nil, fmt.Errorf("issuer: %w", err)
	}
	g := &GeneratedInstall{IssuerNotAfter: issuer.NotAfter}
	g.AnchorsPEM = encodeCertPEM(anchor.Raw)
	g.CertPEM = encodeCertPEM(issuer.Raw)
	if g.KeyPEM, err = encodeECKeyPEM(issuerKey); err != nil {
		return nil, err
	}
	if g.AnchorKeyPEM, err = encodeECKeyPEM(anchorKey); err != nil {
		return nil, err
	}
	if localTokenKey {
		if g.LocalTokenKey, err = GenerateLocalTokenKey(); err != nil {
			return nil, err
		}
	}
	if _, err := LoadIssuer(g.Material, now); err != nil {
		return nil, fmt.Errorf("generated issuer does not validate: %w", err)
	}
	return g, nil
}

// WriteDir writes the install into dir (created if needed): ca-bundle.crt, crt.pem,
// key.pem, trust-anchor.key and, when generated, token-key.pem. Keys are written 0600. It
// refuses to overwrite existing files unless overwrite is set, and returns the paths written.
func (g *GeneratedInstall) WriteDir(dir string, overwrite bool) ([]string, error) {
	files := []struct {
		name string
		data []byte
		mode fs.FileMode
	}{
		{FileTrustAnchors, g.AnchorsPEM, 0o644},
		{FileIssuerCert, g.CertPEM, 0o644},
		{FileIssuerKey, g.KeyPEM, 0o600},
		{FileTrustAnchorKey, g.AnchorKeyPEM, 0o600},
	}
	if g.LocalTokenKey != nil {
		files = append(files, struct {
			name string
			data []byte
			mode fs.FileMode
		}{FileLocalTokenKey, g.LocalTokenKey, 0o600})
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if !overwrite {
		for _, f := range files {
			p := filepath.Join(dir, f.name)
			if _, err := os.Stat(p); err == nil {
				return nil, fmt.Errorf("%s already exists (use --force to overwrite)", p)
			}
		}
	}
	var paths []string
	for _, f := range files {
		p := filepath.Join(dir, f.name)
		if err := writeFileAtomic(p, f.data, f.mode); err != nil {
			return paths, err
		}
		paths = append(paths, p)
	}
	return paths, nil
}

// writeFileAtomic writes data to a temporary file in the same directory and renames it over
// path, so a watcher never reads half a file.
func writeFileAtomic(path string, data []byte, mode fs.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
