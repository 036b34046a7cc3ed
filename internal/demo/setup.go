package demo

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/meridian-mesh/meridian/identity"
	"github.com/meridian-mesh/meridian/ring"
)

// Trust domain and control-plane namespace of the demo's identities (Linkerd's defaults).
const (
	TrustDomain           = "cluster.local"
	ControlPlaneNamespace = "linkerd"
)

// Secrets are the files the demo keeps in its cache directory: the identity issuer (made on
// first run, as `meridian identity init --out DIR --local-token-key` makes it, and reused
// after), the gossip key, and one token per ServiceAccount (minted at every start).
type Secrets struct {
	IdentityDir   string // ca-bundle.crt, crt.pem, key.pem, trust-anchor.key, token-key.pem
	TrustAnchors  string // the PEM of ca-bundle.crt
	GossipKeyFile string
	// The token files of the control plane's ServiceAccounts (linkerd/linkerd-destination,
	// linkerd/linkerd-policy), with which they get their certificates from identity, and of
	// the demo's own, for its Destination client (linkerd/meridian-demo).
	DestinationToken, PolicyToken, DemoToken string
	tokenDir                                 string
	tokenKey                                 []byte
	// Created says the identity was made now rather than reused.
	Created bool
}

// The ServiceAccounts of the control plane, in ControlPlaneNamespace, as in the chart; and
// the demo's own.
const (
	DestinationSA = "linkerd-destination"
	PolicySA      = "linkerd-policy"
	IdentitySA    = "linkerd-identity"
	DemoSA        = "meridian-demo"
)

// TrustAnchorsFile is the trust anchor bundle the control plane verifies peers with.
func (s *Secrets) TrustAnchorsFile() string {
	return filepath.Join(s.IdentityDir, identity.FileTrustAnchors)
}

// identityValidity is the life of a generated trust anchor and issuer; minRemaining is how
// much of it must be left for a cached one to be reused.
const (
	identityValidity = 365 * 24 * time.Hour
	minRemaining     = 7 * 24 * time.Hour
	tokenLifetime    = 30 * 24 * time.Hour
)

// PrepareSecrets makes or reuses the identity and gossip key under dir.
func PrepareSecrets(dir string, now time.Time) (*Secrets, error) {
	s := &Secrets{IdentityDir: filepath.Join(dir, "identity"), GossipKeyFile: filepath.Join(dir, "gossip.key"), tokenDir: filepath.Join(dir, "tokens")}
	anchors, err := s.loadIdentity(now)
	if err != nil {
		g, err := identity.GenerateInstall(TrustDomain, ControlPlaneNamespace, identityValidity, now, true)
		if err != nil {
			return nil, fmt.Errorf("generate the identity: %w", err)
		}
		if _, err := g.WriteDir(s.IdentityDir, true); err != nil {
			return nil, fmt.Errorf("write the identity: %w", err)
		}
		anchors, s.tokenKey, s.Created = g.AnchorsPEM, g.LocalTokenKey, true
	}
	s.TrustAnchors = string(anchors)
	if err := ensureGossipKey(s.GossipKeyFile); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(s.tokenDir, 0o700); err != nil {
		return nil, err
	}
	for sa, file := range map[string]*string{DestinationSA: &s.DestinationToken, PolicySA: &s.PolicyToken, DemoSA: &s.DemoToken} {
		if *file, err = s.Token(ControlPlaneNamespace, sa, now); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// loadIdentity reads a cached identity, returning an error when there is none or it is not
// fit to use (it does not load, or expires within minRemaining).
func (s *Secrets) loadIdentity(now time.Time) ([]byte, error) {
	read := func(name string) ([]byte, error) { return os.ReadFile(filepath.Join(s.IdentityDir, name)) }
	var m identity.Material
	var err error
	if m.AnchorsPEM, err = read(identity.FileTrustAnchors); err != nil {
		return nil, err
	}
	if m.CertPEM, err = read(identity.FileIssuerCert); err != nil {
		return nil, err
	}
	if m.KeyPEM, err = read(identity.FileIssuerKey); err != nil {
		return nil, err
	}
	if s.tokenKey, err = read(identity.FileLocalTokenKey); err != nil {
		return nil, err
	}
	if _, err := identity.ParseLocalTokenKey(s.tokenKey); err != nil {
		return nil, err
	}
	if _, err := identity.LoadIssuer(m, now.Add(minRemaining)); err != nil {
		return nil, err
	}
	return m.AnchorsPEM, nil
}

// ensureGossipKey writes a new 32-byte key (base64) unless path holds a valid one.
func ensureGossipKey(path string) error {
	if _, err := ring.LoadGossipKey(path); err == nil {
		return nil
	}
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(base64.StdEncoding.EncodeToString(k)+"\n"), 0o600)
}

// TokenKeyFile is the local token signing key the identity service checks tokens with.
func (s *Secrets) TokenKeyFile() string {
	return filepath.Join(s.IdentityDir, identity.FileLocalTokenKey)
}

// Token mints a token for the ServiceAccount namespace/sa into a file and returns its path.
func (s *Secrets) Token(namespace, sa string, now time.Time) (string, error) {
	if namespace == "" || sa == "" {
		return "", errors.New("token: namespace and ServiceAccount are required")
	}
	k, err := identity.ParseLocalTokenKey(s.tokenKey)
	if err != nil {
		return "", err
	}
	tok, err := identity.MintLocalToken(k, namespace, sa, identity.Audience, now, tokenLifetime)
	if err != nil {
		return "", err
	}
	path := filepath.Join(s.tokenDir, namespace+"."+sa+".token")
	return path, os.WriteFile(path, tok, 0o600)
}

// Identity is the mesh identity of a ServiceAccount.
func Identity(namespace, sa string) string {
	return identity.ServiceAccountIdentity(namespace, sa, ControlPlaneNamespace, TrustDomain)
}
