package identity

import (
	"errors"
	"fmt"
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
	return nil
}
