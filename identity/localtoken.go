package identity

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"time"
)

// LocalIssuer is the "iss" claim of local-mesh tokens.
const LocalIssuer = "meridian-local"

// localHeader is the only header local tokens carry: {"alg":"ES256","typ":"JWT"}.
var localHeader = base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"ES256","typ":"JWT"}`))

// LocalClaims are the claims of a local-mesh token: a JWT (RFC 7519) signed with ES256.
type LocalClaims struct {
	Issuer    string   `json:"iss"`
	Subject   string   `json:"sub"`
	Audience  []string `json:"aud"`
	IssuedAt  int64    `json:"iat"`
	NotBefore int64    `json:"nbf"`
	Expiry    int64    `json:"exp"`
}

// GenerateLocalTokenKey returns a new ECDSA P-256 token signing key as PKCS#8 PEM.
func GenerateLocalTokenKey() ([]byte, error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	return encodeECKeyPEM(k)
}

// ParseLocalTokenKey reads a PEM token signing key written by GenerateLocalTokenKey.
func ParseLocalTokenKey(pemData []byte) (*ecdsa.PrivateKey, error) {
	s, err := parsePrivateKeyPEM(pemData)
	if err != nil {
		return nil, fmt.Errorf("token signing key: %w", err)
	}
	k, ok := s.(*ecdsa.PrivateKey)
	if !ok || k.Curve != elliptic.P256() {
		return nil, fmt.Errorf("token signing key must be ECDSA P-256, got %T", s)
	}
	return k, nil
}

// MintLocalTokenPEM is MintLocalToken with the signing key as PEM, as GenerateLocalTokenKey
// writes it.
func MintLocalTokenPEM(keyPEM []byte, namespace, serviceAccount, aud string, now time.Time, ttl time.Duration) ([]byte, error) {
	k, err := ParseLocalTokenKey(keyPEM)
	if err != nil {
		return nil, err
	}
	return MintLocalToken(k, namespace, serviceAccount, aud, now, ttl)
}

// MintLocalToken returns a token for ServiceAccount namespace/serviceAccount with audience
// aud, valid from now for ttl, signed with key. It is what the local mesh gives its proxies
// in place of a projected ServiceAccount token.
func MintLocalToken(key *ecdsa.PrivateKey, namespace, serviceAccount, aud string, now time.Time, ttl time.Duration) ([]byte, error) {
	c := LocalClaims{
		Issuer:    LocalIssuer,
		Subject:   "system:serviceaccount:" + namespace + ":" + serviceAccount,
		Audience:  []string{aud},
		IssuedAt:  now.Unix(),
		NotBefore: now.Unix(),
		Expiry:    now.Add(ttl).Unix(),
	}
	body, err := json.Marshal(c)
	if err != nil {
		return nil, err
	}
	signing := localHeader + "." + base64.RawURLEncoding.EncodeToString(body)
	h := sha256.Sum256([]byte(signing))
	r, s, err := ecdsa.Sign(rand.Reader, key, h[:])
	if err != nil {
		return nil, err
	}
	sig := make([]byte, 64)
	r.FillBytes(sig[:32])
	s.FillBytes(sig[32:])
	return []byte(signing + "." + base64.RawURLEncoding.EncodeToString(sig)), nil
}

// LocalReviewer reviews local-mesh tokens against the public half of the signing key,
// the way the API server reviews ServiceAccount tokens: a token that is not one of ours
// (another key, another issuer) is not authenticated; one of ours that is malformed,
// expired, not yet valid or for another audience is reported with an Error.
type LocalReviewer struct {
	Key      *ecdsa.PublicKey
	Audience string
	// Leeway tolerates clock differences on exp and nbf.
	Leeway time.Duration
	// Now returns the current time; nil means time.Now.
	Now func() time.Time
}

var _ TokenReviewer = (*LocalReviewer)(nil)

// NewLocalReviewer returns a reviewer for tokens signed by key with audience Audience.
func NewLocalReviewer(key *ecdsa.PublicKey) *LocalReviewer {
	return &LocalReviewer{Key: key, Audience: Audience, Leeway: 5 * time.Second}
}

// Review implements TokenReviewer. It never returns an error.
func (l *LocalReviewer) Review(_ context.Context, token []byte) (Review, error) {
	c, err := l.verify(token)
	if err != nil {
		var na notOurs
		if errors.As(err, &na) {
			return Review{}, nil
		}
		return Review{Error: err.Error()}, nil
	}
	return Review{Authenticated: true, Username: c.Subject}, nil
}

type notOurs struct{ error }

func (l *LocalReviewer) verify(token []byte) (*LocalClaims, error) {
	if len(token) > MaxTokenSize {
		return nil, errors.New("malformed token: too long")
	}
	parts := strings.Split(string(token), ".")
	if len(parts) != 3 {
		return nil, fmt.Errorf("malformed token: %d dot-separated parts, want 3", len(parts))
	}
	if parts[0] != localHeader {
		hdr, err := base64.RawURLEncoding.DecodeString(parts[0])
		if err != nil || !json.Valid(hdr) {
			return nil, errors.New("malformed token: header is not base64url JSON")
		}
		// A well-formed JWT of another kind (another algorithm): not ours.
		return nil, notOurs{errors.New("unsupported token header")}
	}
	body, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return nil, fmt.Errorf("malformed token: claims: %v", err)
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil || len(sig) != 64 {
		return nil, errors.New("malformed token: signature is not a base64url 64-byte ES256 signature")
	}
	var c LocalClaims
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("malformed token: claims: %v", err)
	}
	if dec.More() {
		return nil, errors.New("malformed token: trailing data after claims")
	}
	if c.Issuer != LocalIssuer {
		return nil, notOurs{fmt.Errorf("issuer %q", c.Issuer)}
	}
	h := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	r, s := new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])
	if l.Key == nil || !ecdsa.Verify(l.Key, h[:], r, s) {
		return nil, notOurs{errors.New("signature does not verify")}
	}
	now := time.Now()
	if l.Now != nil {
		now = l.Now()
	}
	if c.Expiry == 0 || now.Unix() > c.Expiry+int64(l.Leeway/time.Second) {
		return nil, fmt.Errorf("token has expired (exp %s)", time.Unix(c.Expiry, 0).UTC().Format(time.RFC3339))
	}
	if now.Unix()+int64(l.Leeway/time.Second) < c.NotBefore {
		return nil, fmt.Errorf("token is not valid before %s", time.Unix(c.NotBefore, 0).UTC().Format(time.RFC3339))
	}
	if !slices.Contains(c.Audience, l.Audience) {
		return nil, fmt.Errorf("token audiences %q do not include %q", c.Audience, l.Audience)
	}
	if c.Subject == "" {
		return nil, errors.New("malformed token: empty subject")
	}
	return &c, nil
}
