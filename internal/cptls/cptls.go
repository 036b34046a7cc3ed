package cptls

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/meridian-mesh/meridian/identity/client"
	"github.com/meridian-mesh/meridian/internal/tlsid"
)

// DefaultTokenFile is where Linkerd's pods (and Meridian's chart) mount the projected
// ServiceAccount token with audience identity.l5d.io.
const DefaultTokenFile = "/var/run/secrets/tokens/linkerd-identity-token"

// Config says how a server secures its gRPC API. Build it with DefaultConfig; cmd/meridian
// fills it from the flags every server shares.
type Config struct {
	// Plaintext serves and calls gRPC without TLS: for the local mesh and tests only.
	Plaintext bool
	// Name is this server's identity: the DNS SAN of its certificate, which its clients
	// verify (linkerd-destination.linkerd.serviceaccount.identity.linkerd.cluster.local).
	Name string

	// How a server that is not the identity service gets its certificate (New).

	// IdentityAddr is the identity service's gRPC address.
	IdentityAddr string
	// IdentityName is the identity service's own identity, verified on the connection to it.
	IdentityName string
	// TrustAnchorsFile is the PEM bundle of the mesh's trust anchors.
	TrustAnchorsFile string
	// TokenFile holds the ServiceAccount token, read before every Certify (it rotates).
	TokenFile string
	// Client is the renewing client's configuration; its Identity and TrustAnchors are set
	// from Name and TrustAnchorsFile.
	Client client.Config
}

// DefaultConfig returns TLS with the token at DefaultTokenFile and the proxy's renewal (70%
// of the remaining validity, within [10s, 24h]), its backoff capped at 10 s rather than a
// minute: a server is not ready until it has its first certificate.
func DefaultConfig() Config {
	c := client.DefaultConfig()
	c.MaxBackoff = 10 * time.Second
	return Config{TokenFile: DefaultTokenFile, Client: c}
}

// validate reports what New cannot work without.
func (c Config) validate(fromIdentity bool) error {
	if c.Plaintext {
		return nil
	}
	var missing []string
	if c.Name == "" {
		missing = append(missing, "this server's identity")
	}
	if fromIdentity {
		for _, m := range []struct{ v, what string }{
			{c.IdentityAddr, "the identity service's address"},
			{c.IdentityName, "the identity service's identity"},
			{c.TrustAnchorsFile, "the trust anchors file"},
			{c.TokenFile, "the ServiceAccount token file"},
		} {
			if m.v == "" {
				missing = append(missing, m.what)
			}
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("control-plane TLS needs %s", joinAnd(missing))
	}
	return nil
}

func joinAnd(s []string) string {
	switch len(s) {
	case 1:
		return s[0]
	case 2:
		return s[0] + " and " + s[1]
	}
	out := ""
	for i, x := range s {
		switch {
		case i == len(s)-1:
			out += ", and " + x
		case i > 0:
			out += ", " + x
		default:
			out = x
		}
	}
	return out
}

// Source is where a server's own certificate comes from: it serves the certificate to TLS
// handshakes (tlsid.Certs), keeps it fresh until ctx ends (Run), and says whether it holds a
// valid one (Ready). identity.ServingCert is one.
type Source interface {
	tlsid.Certs
	Run(ctx context.Context) error
	Ready() error
}

// Identity is a server's TLS identity: its certificate source, the trust anchors, and the
// credentials made of them; or, with Config.Plaintext, none. Build it with New or
// NewSelfIssued, add it to the process's group (it is a run.Component, run.Readier and
// run.Warner) and Close it when the process ends.
type Identity struct {
	cfg  Config
	log  *zap.Logger
	tls  *tlsid.Config // nil: plaintext
	src  Source        // nil: plaintext
	conn *grpc.ClientConn
	// waiting describes what Ready waits for.
	waiting string
}

// New returns the identity of a server whose certificate comes from the identity service
// (destination, policy): it reads the trust anchors and prepares the renewing client over a
// TLS connection that verifies cfg.IdentityName; Run obtains the certificate and renews it.
// log may be nil.
func New(cfg Config, log *zap.Logger) (*Identity, error) {
	if log == nil {
		log = zap.NewNop()
	}
	if err := cfg.validate(true); err != nil {
		return nil, err
	}
	if cfg.Plaintext {
		return plaintext(cfg, log), nil
	}
	pemData, err := os.ReadFile(cfg.TrustAnchorsFile)
	if err != nil {
		return nil, fmt.Errorf("read the trust anchors: %w", err)
	}
	roots, err := tlsid.ParseTrustAnchors(pemData)
	if err != nil {
		return nil, fmt.Errorf("trust anchors %s: %w", cfg.TrustAnchorsFile, err)
	}
	anon, err := tlsid.New(nil, roots)
	if err != nil {
		return nil, err
	}
	conn, err := grpc.NewClient(cfg.IdentityAddr, grpc.WithTransportCredentials(credentials.NewTLS(anon.Client(cfg.IdentityName, "h2"))))
	if err != nil {
		return nil, fmt.Errorf("identity service %s: %w", cfg.IdentityAddr, err)
	}
	ccfg := cfg.Client
	ccfg.Identity, ccfg.TrustAnchors = cfg.Name, roots
	c, err := client.New(ccfg, conn, client.FileToken(cfg.TokenFile), log.Named("identity-client"))
	if err != nil {
		_ = conn.Close()
		return nil, err
	}
	id, err := newIdentity(cfg, log, clientSource{c}, roots)
	if err != nil {
		_ = conn.Close()
		return nil, err
	}
	id.conn = conn
	id.waiting = fmt.Sprintf("waiting for this server's certificate (%s) from the identity service at %s", cfg.Name, cfg.IdentityAddr)
	return id, nil
}

// NewSelfIssued returns the identity of the identity service itself, whose certificate src
// issues from its own issuer, trusting anchors. log may be nil.
func NewSelfIssued(cfg Config, src Source, anchors *x509.CertPool, log *zap.Logger) (*Identity, error) {
	if log == nil {
		log = zap.NewNop()
	}
	if err := cfg.validate(false); err != nil {
		return nil, err
	}
	if cfg.Plaintext {
		return plaintext(cfg, log), nil
	}
	if src == nil {
		return nil, errors.New("control-plane TLS: no certificate source")
	}
	id, err := newIdentity(cfg, log, src, anchors)
	if err != nil {
		return nil, err
	}
	id.waiting = "this server's own certificate (" + cfg.Name + ")"
	return id, nil
}

func newIdentity(cfg Config, log *zap.Logger, src Source, roots *x509.CertPool) (*Identity, error) {
	t, err := tlsid.New(src, roots)
	if err != nil {
		return nil, err
	}
	log.Info("control-plane gRPC is mTLS", zap.String("identity", cfg.Name))
	return &Identity{cfg: cfg, log: log, tls: t, src: src}, nil
}

// plaintextWarning is the warning of a server without TLS, in its log and its /ready.
const plaintextWarning = "gRPC is served and called in plaintext (--plaintext): any process that reaches the port can call it, and nothing proves who answers; for a local mesh and tests only"

func plaintext(cfg Config, log *zap.Logger) *Identity {
	log.Warn(plaintextWarning)
	return &Identity{cfg: cfg, log: log}
}

// Plaintext reports whether the server runs without TLS.
func (id *Identity) Plaintext() bool { return id.tls == nil }

// Name is the server's identity ("" in plaintext without one configured).
func (id *Identity) Name() string { return id.cfg.Name }

// ServerCredentials are the credentials to serve gRPC with: TLS 1.3 with the server's
// certificate, requiring a client certificate that chains to the trust anchors when
// requireClient (the destination and policy APIs), verifying one only when given otherwise
// (identity: a proxy has none before its first). Plaintext: insecure credentials.
func (id *Identity) ServerCredentials(requireClient bool) credentials.TransportCredentials {
	switch {
	case id.tls == nil:
		return insecure.NewCredentials()
	case requireClient:
		return credentials.NewTLS(id.tls.ServerRequiringClientCert("h2"))
	}
	return credentials.NewTLS(id.tls.Server("h2"))
}

// ClientCredentials are the credentials to call a peer that must prove identity peer (a
// destination replica relaying to another passes its own name: every replica has it),
// presenting the server's certificate. Plaintext: insecure credentials.
func (id *Identity) ClientCredentials(peer string) credentials.TransportCredentials {
	if id.tls == nil {
		return insecure.NewCredentials()
	}
	return credentials.NewTLS(id.tls.Client(peer, "h2"))
}

// Run obtains and renews the certificate until ctx ends (in plaintext it only waits).
func (id *Identity) Run(ctx context.Context) error {
	if id.src == nil {
		<-ctx.Done()
		return nil
	}
	return id.src.Run(ctx)
}

// Ready reports nil once the server holds its certificate (at once in plaintext).
func (id *Identity) Ready() error {
	if id.src == nil {
		return nil
	}
	if err := id.src.Ready(); err != nil {
		return fmt.Errorf("%s: %w", id.waiting, err)
	}
	return nil
}

// Warnings says that the server runs in plaintext, when it does.
func (id *Identity) Warnings() []string {
	if id.tls == nil {
		return []string{plaintextWarning}
	}
	return nil
}

// Close closes the connection to the identity service. Call it after Run has returned, or
// when Run was never called.
func (id *Identity) Close() {
	if id.conn != nil {
		_ = id.conn.Close()
	}
}

// clientSource adapts the renewing client to Source.
type clientSource struct{ *client.Client }

func (c clientSource) Ready() error {
	crt := c.Certificate()
	switch {
	case crt == nil:
		return errors.New("none yet")
	case !time.Now().Before(crt.Leaf.NotAfter):
		return fmt.Errorf("it expired at %s and was not renewed", crt.Leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	return nil
}
