package identity

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Audience is the audience proxies request for their ServiceAccount token and the one
// TokenReview checks, as in Linkerd.
const Audience = "identity.l5d.io"

// Config configures the identity Service. Build it with DefaultConfig and override fields.
type Config struct {
	// TrustDomain is the last part of every identity, e.g. "cluster.local".
	TrustDomain string
	// ControlPlaneNamespace is the namespace the control plane runs in, e.g. "linkerd".
	ControlPlaneNamespace string
	// Lifetime is how long issued certificates live (never past the issuer chain).
	Lifetime time.Duration
	// ClockSkew is subtracted from NotBefore so peers with slow clocks accept new
	// certificates.
	ClockSkew time.Duration
	// ReloadInterval is how often the issuer source is polled for changes (files are also
	// watched with fsnotify, so this is the fallback for missed events).
	ReloadInterval time.Duration
	// ReviewTimeout bounds one token review.
	ReviewTimeout time.Duration

	// Where the issuer comes from and how tokens are checked (what New builds; NewService
	// takes the source and reviewer ready-made instead).

	// IssuerDir holds crt.pem/key.pem (or tls.crt/tls.key); empty means the Kubernetes Secret
	// linkerd-identity-issuer and ConfigMap linkerd-identity-trust-roots in
	// ControlPlaneNamespace.
	IssuerDir string
	// AnchorsFile is the trust anchor bundle with IssuerDir (default IssuerDir/ca-bundle.crt).
	AnchorsFile string
	// Tokens is the token reviewer: TokensKubernetes (TokenReview) or TokensLocal.
	Tokens string
	// LocalTokenKey is the PEM file of the local-mesh token signing key, with TokensLocal.
	LocalTokenKey string
	// EventDeployment is the Deployment in ControlPlaneNamespace that issuer update events
	// are recorded on (Kubernetes only; empty: no events).
	EventDeployment string
}

// The token reviewers of Config.Tokens.
const (
	TokensKubernetes = "kubernetes" // Kubernetes TokenReview, audience identity.l5d.io
	TokensLocal      = "local"      // tokens signed with Config.LocalTokenKey (the local mesh)
)

// NeedsKubernetes reports whether New needs a Kubernetes client for c, and for what.
func (c Config) NeedsKubernetes() (bool, string) {
	var n []string
	if c.IssuerDir == "" {
		n = append(n, "the issuer Secret (or pass --issuer-dir)")
	}
	if c.Tokens == TokensKubernetes {
		n = append(n, "TokenReview (or pass --tokens=local)")
	}
	return len(n) > 0, strings.Join(n, " and ")
}

// DefaultConfig returns Linkerd's defaults: trust domain cluster.local, control plane
// namespace linkerd, 24h certificates, 20s clock-skew allowance.
func DefaultConfig() Config {
	return Config{
		TrustDomain:           "cluster.local",
		ControlPlaneNamespace: "linkerd",
		Lifetime:              24 * time.Hour,
		ClockSkew:             20 * time.Second,
		ReloadInterval:        30 * time.Second,
		ReviewTimeout:         10 * time.Second,
		Tokens:                TokensKubernetes,
		EventDeployment:       "linkerd-identity",
	}
}

// Validate reports the first problem with c.
func (c Config) Validate() error {
	if c.TrustDomain == "" {
		return errors.New("trust domain is empty")
	}
	if c.ControlPlaneNamespace == "" {
		return errors.New("control plane namespace is empty")
	}
	if c.Lifetime <= 0 {
		return fmt.Errorf("certificate lifetime %v must be positive", c.Lifetime)
	}
	if c.ClockSkew < 0 {
		return fmt.Errorf("clock skew %v must not be negative", c.ClockSkew)
	}
	if c.ReloadInterval <= 0 {
		return fmt.Errorf("reload interval %v must be positive", c.ReloadInterval)
	}
	if c.ReviewTimeout <= 0 {
		return fmt.Errorf("review timeout %v must be positive", c.ReviewTimeout)
	}
	switch c.Tokens {
	case TokensKubernetes, TokensLocal, "":
	default:
		return fmt.Errorf("token reviewer %q: want %s or %s", c.Tokens, TokensKubernetes, TokensLocal)
	}
	if c.Tokens == TokensLocal && c.LocalTokenKey == "" {
		return fmt.Errorf("the %s token reviewer needs a local token key file", TokensLocal)
	}
	return nil
}
