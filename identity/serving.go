package identity

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/meridian-mesh/meridian/internal/quote"
)

// ServingCert is the identity service's own certificate, with which it serves Certify over
// TLS: a leaf for the service's identity (linkerd-identity.NS.serviceaccount.identity.NS.TD)
// signed by the Service's issuer directly, without a Certify call (the CA needs no token to
// trust itself, and there is no one to ask before it serves). Its ECDSA P-256 key is made
// once, in memory. Run re-issues the certificate at 70% of its validity (as a proxy renews)
// and at once when the issuer changes; a failed re-issue keeps the current certificate and is
// tried again after servingRetry.
//
// GetCertificate, GetClientCertificate, Certificate and Ready are safe for concurrent use; Run
// is called once. It implements internal/tlsid's Certs.
type ServingCert struct {
	svc  *Service
	name string
	key  *ecdsa.PrivateKey
	log  *zap.Logger

	cert     atomic.Pointer[tls.Certificate]
	issuedBy *Issuer // the issuer of cert; written by NewServingCert, then by Run only
	issued   atomic.Int64
}

// Bounds of the ServingCert's renewal: the wait before a renewal is clamped to
// [servingMinRenew, servingMaxRenew]; a failure is retried after servingRetry.
const (
	servingMinRenew = time.Second
	servingMaxRenew = 24 * time.Hour
	servingRetry    = 5 * time.Second
	servingFraction = 0.7
)

// NewServingCert issues the first certificate for name from svc's issuer, which must be
// loaded (identity.New loads it). It fails when name is not a DNS name or the issuer cannot
// sign (it has expired). log may be nil.
func NewServingCert(svc *Service, name string, log *zap.Logger) (*ServingCert, error) {
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return nil, fmt.Errorf("identity service name %s: %s", quote.String(name), strings.Join(errs, "; "))
	}
	iss := svc.Issuer()
	if iss == nil {
		return nil, errors.New("the identity service's own certificate: the issuer is not loaded")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate the identity service's key: %w", err)
	}
	if log == nil {
		log = zap.NewNop()
	}
	c := &ServingCert{svc: svc, name: name, key: key, log: log}
	if err := c.issue(iss); err != nil {
		return nil, err
	}
	return c, nil
}

// issue signs a new leaf with iss and installs it.
func (c *ServingCert) issue(iss *Issuer) error {
	der, notAfter, err := iss.issue(&c.key.PublicKey, c.name, c.svc.now(), c.svc.cfg.Lifetime, c.svc.cfg.ClockSkew)
	if err != nil {
		return fmt.Errorf("issue the identity service's own certificate %s: %w", c.name, err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return fmt.Errorf("parse the identity service's own certificate: %w", err)
	}
	chain := append([][]byte{der}, iss.Chain...)
	c.cert.Store(&tls.Certificate{Certificate: chain, PrivateKey: c.key, Leaf: leaf})
	c.issuedBy = iss
	c.issued.Add(1)
	c.log.Info("identity service certificate issued", zap.String("identity", c.name),
		zap.String("issuer", quote.Message(iss.Cert.Subject.String())), zap.Time("validUntil", notAfter))
	return nil
}

// Run keeps the certificate fresh until ctx ends, then returns nil.
func (c *ServingCert) Run(ctx context.Context) error {
	wait := c.renewIn()
	for {
		iss, changed := c.svc.IssuerUpdates()
		if iss != c.issuedBy {
			wait = 0 // the issuer changed before we looked
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-changed:
			t.Stop()
		case <-t.C:
		}
		if err := c.issue(c.svc.Issuer()); err != nil {
			c.log.Warn("identity service certificate not renewed; keeping the current one", zap.Duration("retryIn", servingRetry), zap.Error(err))
			wait = servingRetry
			continue
		}
		wait = c.renewIn()
	}
}

// renewIn is how long to wait before renewing the current certificate.
func (c *ServingCert) renewIn() time.Duration {
	left := c.cert.Load().Leaf.NotAfter.Sub(c.svc.now())
	return min(max(time.Duration(float64(left)*servingFraction), servingMinRenew), servingMaxRenew)
}

// Certificate returns the current certificate. It is never modified; renewal replaces it.
func (c *ServingCert) Certificate() *tls.Certificate { return c.cert.Load() }

// Issued returns how many certificates have been issued, the first included.
func (c *ServingCert) Issued() int64 { return c.issued.Load() }

// GetCertificate is for tls.Config.GetCertificate.
func (c *ServingCert) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return c.cert.Load(), nil
}

// GetClientCertificate is for tls.Config.GetClientCertificate.
func (c *ServingCert) GetClientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	return c.cert.Load(), nil
}

// Ready reports nil while the certificate is valid (for the admin /ready endpoint).
func (c *ServingCert) Ready() error {
	if crt := c.cert.Load(); !c.svc.now().Before(crt.Leaf.NotAfter) {
		return fmt.Errorf("the identity service's own certificate expired at %s and could not be renewed", crt.Leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	return nil
}
