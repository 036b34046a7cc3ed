package client

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	pb "github.com/linkerd/linkerd2-proxy-api/go/identity"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/meridian-mesh/meridian/internal/quote"
)

// Config configures a Client. Build it with DefaultConfig and set Identity.
type Config struct {
	// Identity is the name to certify, e.g. web.default.serviceaccount.identity.linkerd.cluster.local.
	Identity string
	// TrustAnchors, when set, must verify every certificate received (with its
	// intermediates); a response that does not is treated as a failure.
	TrustAnchors *x509.CertPool
	// RenewFraction of the remaining validity is waited before renewing (0.7).
	RenewFraction float64
	// MinRefresh and MaxRefresh clamp the wait before a renewal.
	MinRefresh, MaxRefresh time.Duration
	// InitialBackoff doubles after each failed attempt up to MaxBackoff; each wait is
	// jittered to between half and all of it.
	InitialBackoff, MaxBackoff time.Duration
	// CallTimeout bounds one Certify call, token read included.
	CallTimeout time.Duration
}

// DefaultConfig returns Linkerd's proxy defaults: renew at 70% of the remaining validity,
// clamped to [10s, 24h]; backoff from 1s to 1m; 10s per call.
func DefaultConfig() Config {
	return Config{
		RenewFraction:  0.7,
		MinRefresh:     10 * time.Second,
		MaxRefresh:     24 * time.Hour,
		InitialBackoff: time.Second,
		MaxBackoff:     time.Minute,
		CallTimeout:    10 * time.Second,
	}
}

func (c Config) validate() error {
	switch {
	case c.Identity == "":
		return errors.New("identity is empty")
	case c.RenewFraction <= 0 || c.RenewFraction > 1:
		return fmt.Errorf("renew fraction %v must be in (0, 1]", c.RenewFraction)
	case c.MinRefresh <= 0 || c.MaxRefresh < c.MinRefresh:
		return fmt.Errorf("refresh bounds [%v, %v] are not a positive interval", c.MinRefresh, c.MaxRefresh)
	case c.InitialBackoff <= 0 || c.MaxBackoff < c.InitialBackoff:
		return fmt.Errorf("backoff bounds [%v, %v] are not a positive interval", c.InitialBackoff, c.MaxBackoff)
	case c.CallTimeout <= 0:
		return fmt.Errorf("call timeout %v must be positive", c.CallTimeout)
	}
	return nil
}

// TokenSource returns the current ServiceAccount token. It is called before every Certify,
// from the Run goroutine only, because projected tokens rotate.
type TokenSource func(ctx context.Context) ([]byte, error)

// FileToken reads the token from path on every call (a projected token volume).
func FileToken(path string) TokenSource {
	return func(context.Context) ([]byte, error) {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("read token: %w", err)
		}
		return []byte(strings.TrimSpace(string(b))), nil
	}
}

// StaticToken always returns tok.
func StaticToken(tok []byte) TokenSource {
	return func(context.Context) ([]byte, error) { return tok, nil }
}

// Client keeps a certificate for one identity. GetCertificate, GetClientCertificate,
// Certificate and Ready are safe for concurrent use; Run is called once.
type Client struct {
	cfg    Config
	rpc    pb.IdentityClient
	tokens TokenSource
	log    *zap.Logger

	key *ecdsa.PrivateKey
	csr []byte // DER, built once: it binds the key to the identity and is reused

	cert      atomic.Pointer[tls.Certificate]
	ready     chan struct{}
	readyOnce sync.Once
	renewals  atomic.Int64
}

// New generates the key and CSR for cfg.Identity. conn is the connection to the identity
// service; log may be nil.
func New(cfg Config, conn grpc.ClientConnInterface, tokens TokenSource, log *zap.Logger) (*Client, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("identity client config: %w", err)
	}
	if tokens == nil {
		return nil, errors.New("identity client: a token source is required")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate key: %w", err)
	}
	csr, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject:  pkix.Name{CommonName: cfg.Identity},
		DNSNames: []string{cfg.Identity},
	}, key)
	if err != nil {
		return nil, fmt.Errorf("create CSR: %w", err)
	}
	if log == nil {
		log = zap.NewNop()
	}
	return &Client{
		cfg: cfg, rpc: pb.NewIdentityClient(conn), tokens: tokens, log: log,
		key: key, csr: csr, ready: make(chan struct{}),
	}, nil
}

// Ready is closed once the first certificate is held.
func (c *Client) Ready() <-chan struct{} { return c.ready }

// Certificate returns the current certificate, or nil before the first one. The value is
// never modified after it is published; renewal replaces it.
func (c *Client) Certificate() *tls.Certificate { return c.cert.Load() }

// Renewals returns how many certificates the client has obtained.
func (c *Client) Renewals() int64 { return c.renewals.Load() }

// PublicKey returns the client's public key, the same for every certificate.
func (c *Client) PublicKey() *ecdsa.PublicKey { return &c.key.PublicKey }

var errNoCert = errors.New("no identity certificate yet")

// GetCertificate is for tls.Config.GetCertificate.
func (c *Client) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	if crt := c.cert.Load(); crt != nil {
		return crt, nil
	}
	return nil, errNoCert
}

// GetClientCertificate is for tls.Config.GetClientCertificate.
func (c *Client) GetClientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	return c.GetCertificate(nil)
}

// Run obtains a certificate and keeps renewing it until ctx ends; it then returns nil.
func (c *Client) Run(ctx context.Context) error {
	backoff := c.cfg.InitialBackoff
	for {
		var wait time.Duration
		crt, err := c.certify(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			wait = backoff/2 + mrand.N(backoff/2+1)
			c.log.Warn("identity certify failed; retrying", zap.String("identity", quote.Message(c.cfg.Identity)),
				zap.Duration("in", wait), zap.Error(err))
			backoff = min(2*backoff, c.cfg.MaxBackoff)
		} else {
			backoff = c.cfg.InitialBackoff
			c.cert.Store(crt)
			c.renewals.Add(1)
			c.readyOnce.Do(func() { close(c.ready) })
			now := time.Now()
			wait = RefreshDelay(crt.Leaf.NotAfter, now, c.cfg)
			c.log.Info("identity certified", zap.String("identity", quote.Message(c.cfg.Identity)),
				zap.Time("validUntil", crt.Leaf.NotAfter), zap.Duration("renewIn", wait))
		}
		if !pause(ctx, wait) {
			return nil
		}
	}
}

// wallCheck is the longest sleepUntil waits before it reads the wall clock again.
const wallCheck = time.Minute

// pause waits d, or until ctx ends (false). A wait longer than wallCheck (a renewal) follows
// the wall clock (sleepUntil); a shorter one (a retry's backoff) the monotonic clock, which a
// step of the wall clock back does not stretch.
func pause(ctx context.Context, d time.Duration) bool {
	if d > wallCheck {
		return sleepUntil(ctx, time.Now().Add(d), wallCheck, time.Now)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// sleepUntil waits until the wall clock (now) reaches deadline, or until ctx ends, when it
// returns false. It waits in steps of at most step: Go's
// timers count monotonic time, which stops while the host is suspended (a laptop asleep, a
// paused VM), and a renewal due by the wall clock must not come hours after the certificate
// expired.
func sleepUntil(ctx context.Context, deadline time.Time, step time.Duration, now func() time.Time) bool {
	deadline = deadline.Round(0) // compared by the wall clock, not the monotonic one
	for {
		d := deadline.Sub(now().Round(0))
		if d <= 0 {
			return ctx.Err() == nil
		}
		t := time.NewTimer(min(d, step))
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-t.C:
		}
	}
}

// RefreshDelay is how long to wait before renewing a certificate valid until validUntil:
// RenewFraction of the remaining validity, clamped to [MinRefresh, MaxRefresh].
func RefreshDelay(validUntil, now time.Time, cfg Config) time.Duration {
	d := time.Duration(float64(validUntil.Sub(now)) * cfg.RenewFraction)
	return min(max(d, cfg.MinRefresh), cfg.MaxRefresh)
}

// CertifyOnce makes one attempt, as Run does each time: it reads the token, calls Certify
// (bounded by CallTimeout) and checks the answer. It neither stores the certificate nor
// retries; it is for callers that decide themselves what to do with a failure, such as
// `meridian identity certify`. The error is Certify's gRPC status, the token source's error,
// or a *ResponseError for an answer that fails the checks.
func (c *Client) CertifyOnce(ctx context.Context) (*tls.Certificate, error) { return c.certify(ctx) }

// ResponseError is a Certify answer the client refuses: a leaf that does not parse, does not
// carry the client's key or identity, has expired, or does not verify against the trust
// anchors. Asking again gets the same answer from the same service.
type ResponseError struct{ Err error }

func (e *ResponseError) Error() string { return e.Err.Error() }
func (e *ResponseError) Unwrap() error { return e.Err }

func (c *Client) certify(ctx context.Context) (*tls.Certificate, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.CallTimeout)
	defer cancel()
	tok, err := c.tokens(ctx)
	if err != nil {
		return nil, err
	}
	rsp, err := c.rpc.Certify(ctx, &pb.CertifyRequest{
		Identity:                  c.cfg.Identity,
		Token:                     tok,
		CertificateSigningRequest: c.csr,
	})
	if err != nil {
		return nil, err
	}
	crt, err := c.check(rsp, time.Now())
	if err != nil {
		return nil, &ResponseError{Err: err}
	}
	return crt, nil
}

// check turns a response into a tls.Certificate after checking it is ours.
func (c *Client) check(rsp *pb.CertifyResponse, now time.Time) (*tls.Certificate, error) {
	leaf, err := x509.ParseCertificate(rsp.GetLeafCertificate())
	if err != nil {
		return nil, fmt.Errorf("response leaf certificate: %w", err)
	}
	if !c.key.PublicKey.Equal(leaf.PublicKey) {
		return nil, errors.New("response leaf certificate does not carry our key")
	}
	// Exactly our name, as the identity service signs it: not a wildcard, a name in other
	// case, or ours among others; and no CA.
	if len(leaf.DNSNames) != 1 || leaf.DNSNames[0] != c.cfg.Identity {
		return nil, fmt.Errorf("response leaf certificate is for %s, not exactly %s", quote.String(strings.Join(leaf.DNSNames, ", ")), c.cfg.Identity)
	}
	if leaf.IsCA {
		return nil, errors.New("response leaf certificate is a CA")
	}
	if !now.Before(leaf.NotAfter) {
		return nil, fmt.Errorf("response leaf certificate expired at %s", leaf.NotAfter)
	}
	chain := [][]byte{leaf.Raw}
	inter := x509.NewCertPool()
	for i, der := range rsp.GetIntermediateCertificates() {
		ic, err := x509.ParseCertificate(der)
		if err != nil {
			return nil, fmt.Errorf("response intermediate certificate %d: %w", i, err)
		}
		inter.AddCert(ic)
		chain = append(chain, der)
	}
	if c.cfg.TrustAnchors != nil {
		// Each usage on its own: Verify passes a chain that allows any one of those listed,
		// and the certificate must serve both sides of mTLS.
		for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
			if _, err := leaf.Verify(x509.VerifyOptions{
				Roots: c.cfg.TrustAnchors, Intermediates: inter, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{usage},
			}); err != nil {
				return nil, fmt.Errorf("response certificate does not verify against the trust anchors for %s: %w", usageName(usage), err)
			}
		}
	}
	return &tls.Certificate{Certificate: chain, PrivateKey: c.key, Leaf: leaf}, nil
}

// usageName names an extended key usage in errors.
func usageName(u x509.ExtKeyUsage) string {
	if u == x509.ExtKeyUsageServerAuth {
		return "server authentication"
	}
	return "client authentication"
}
