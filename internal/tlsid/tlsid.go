package tlsid

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"sync"

	"github.com/meridian-mesh/meridian/internal/quote"
)

// Certs supplies the proxy's own certificate; *identity/client.Client implements it. Both
// methods are called from handshakes on many goroutines and must be safe for concurrent use.
type Certs interface {
	GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error)
	GetClientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error)
}

// ErrNoIdentity is returned by PeerIdentity for a connection whose peer proved none.
var ErrNoIdentity = errors.New("peer presented no verified identity")

// Config builds the proxy's TLS configurations. Build it with New; it is safe for concurrent
// use and caches one client configuration per peer identity.
type Config struct {
	certs Certs
	roots *x509.CertPool

	clients sync.Map // identity+ALPN -> *tls.Config
	// sessions lets a client resume TLS 1.3 sessions with peers it already talked to.
	sessions tls.ClientSessionCache
}

// New returns a Config presenting certificates from certs and trusting roots (the mesh's trust
// anchors). certs may be nil for a client that has no certificate yet (the connection to the
// identity service itself).
func New(certs Certs, roots *x509.CertPool) (*Config, error) {
	if roots == nil {
		return nil, errors.New("tlsid: no trust anchors")
	}
	return &Config{certs: certs, roots: roots, sessions: tls.NewLRUClientSessionCache(1024)}, nil
}

// Client returns the configuration for a connection to a peer that must prove identity,
// offering the given ALPN protocols. The result is shared: do not modify it.
func (c *Config) Client(identity string, alpn ...string) *tls.Config {
	key := identity
	for _, p := range alpn {
		key += "\x00" + p
	}
	if v, ok := c.clients.Load(key); ok {
		return v.(*tls.Config)
	}
	cfg := &tls.Config{
		MinVersion:         tls.VersionTLS13,
		ServerName:         identity, // SNI, and the name the peer's certificate must carry
		RootCAs:            c.roots,
		NextProtos:         append([]string(nil), alpn...),
		ClientSessionCache: c.sessions,
	}
	if c.certs != nil {
		cfg.GetClientCertificate = c.certs.GetClientCertificate
	}
	v, _ := c.clients.LoadOrStore(key, cfg)
	return v.(*tls.Config)
}

// Server returns the configuration for terminating TLS from peers: TLS 1.3, the proxy's own
// certificate, and a client certificate verified against the trust anchors when the client
// presents one (a client without one is accepted, and proves no identity). alpn lists the
// protocols offered, in preference order.
func (c *Config) Server(alpn ...string) *tls.Config {
	cfg := &tls.Config{
		MinVersion: tls.VersionTLS13,
		ClientAuth: tls.VerifyClientCertIfGiven,
		ClientCAs:  c.roots,
		NextProtos: append([]string(nil), alpn...),
	}
	if c.certs != nil {
		cfg.GetCertificate = c.certs.GetCertificate
	}
	return cfg
}

// ServerRequiringClientCert is Server for an API every peer must prove an identity to:
// the handshake fails unless the client presents a certificate that chains to the trust
// anchors. The control plane's destination and policy APIs use it (every proxy holds a
// certificate before it asks them anything).
func (c *Config) ServerRequiringClientCert(alpn ...string) *tls.Config {
	cfg := c.Server(alpn...)
	cfg.ClientAuth = tls.RequireAndVerifyClientCert
	return cfg
}

// Roots returns the trust anchors the Config verifies peers against. Do not modify the pool.
func (c *Config) Roots() *x509.CertPool { return c.roots }

// ParseTrustAnchors returns a pool of the PEM certificates in pemData (a trust anchor bundle,
// as in the ConfigMap linkerd-identity-trust-roots), or an error when it holds none or one
// does not parse.
func ParseTrustAnchors(pemData []byte) (*x509.CertPool, error) {
	certs, err := ParseCertificates(pemData, "trust anchor")
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	for _, c := range certs {
		pool.AddCert(c)
	}
	return pool, nil
}

// ParseCertificates returns the certificates of pemData's CERTIFICATE blocks, in order: at
// least one, each of which parses. Other blocks and the text around blocks are skipped. An
// error names a certificate by what and its number ("trust anchor 2: ...").
func ParseCertificates(pemData []byte, what string) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for rest := pemData; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%s %d: %s", what, len(out)+1, quote.Message(err.Error())) // x509 quotes a bad SAN whole
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no PEM CERTIFICATE block (a %s) found", what)
	}
	return out, nil
}

// TrustAnchorBundle checks a trust anchor bundle that goes into meshed pods' specs
// (LINKERD2_PROXY_IDENTITY_TRUST_ANCHORS) and returns it as they get it: its certificates
// PEM-encoded again, and nothing else of the input. The bundle must be PEM certificates
// only, at least one, each of which parses, and every block must be whole: a private key
// (the anchor's, given by mistake), any other PEM block, or one cut short is refused rather
// than copied into every pod; text outside the blocks (a comment) is left out. The error
// names a block by its number and type, never its contents.
func TrustAnchorBundle(pemData []byte) ([]byte, error) {
	var out []byte
	n := 0
	for rest := pemData; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		n++
		if b.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("PEM block %d is a %.64q, not a CERTIFICATE: a trust anchor bundle holds the anchors' certificates only (never a key: it goes into every meshed pod's spec)",
				n, b.Type)
		}
		if _, err := x509.ParseCertificate(b.Bytes); err != nil {
			return nil, fmt.Errorf("trust anchor %d: %s", n, quote.Message(err.Error()))
		}
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: b.Bytes})...)
	}
	if begins := bytes.Count(pemData, []byte("-----BEGIN")); begins != n {
		return nil, fmt.Errorf("%d PEM blocks begin, but only %d are whole (BEGIN and END lines of one type, base64 between): a block cut short or mistyped is refused, as it may be a key", begins, n)
	}
	if n == 0 {
		return nil, errors.New("no PEM CERTIFICATE block in the trust anchors")
	}
	return out, nil
}

// PeerIdentity returns the identity the peer of a completed handshake proved: the first DNS
// SAN of its verified leaf certificate.
func PeerIdentity(cs tls.ConnectionState) (string, error) {
	if len(cs.VerifiedChains) == 0 || len(cs.VerifiedChains[0]) == 0 {
		return "", ErrNoIdentity
	}
	leaf := cs.VerifiedChains[0][0]
	if len(leaf.DNSNames) == 0 {
		return "", ErrNoIdentity
	}
	return leaf.DNSNames[0], nil
}

// LooksLikeTLS reports whether a connection's first bytes start a TLS handshake record (a
// ClientHello): content type 22 and a TLS 1.x record version. Two bytes are enough; fewer
// say no.
func LooksLikeTLS(prefix []byte) bool {
	return len(prefix) >= 2 && prefix[0] == 0x16 && prefix[1] == 0x03
}
