package identity_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"net"
	"strings"
	"testing"
	"time"

	pb "github.com/linkerd/linkerd2-proxy-api/go/identity"
	"google.golang.org/grpc/codes"

	"github.com/meridian-mesh/meridian/identity"
	"github.com/meridian-mesh/meridian/internal/testutil"
)

func TestCertifyIssuesVerifiableLeaf(t *testing.T) {
	p := newPKI(t)
	s := startServer(t, p, serverOpts{})
	before := time.Now().Truncate(time.Second)
	rsp, leaf := issue(t, s, p)
	if len(rsp.GetIntermediateCertificates()) != 1 || string(rsp.GetIntermediateCertificates()[0]) != string(p.issuer.Raw) {
		t.Fatalf("intermediates: want exactly the issuer, got %d certificates", len(rsp.GetIntermediateCertificates()))
	}
	inter := x509.NewCertPool()
	inter.AddCert(p.issuer)
	for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		if _, err := leaf.Verify(x509.VerifyOptions{DNSName: testID, Roots: p.anchors, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
			t.Fatalf("leaf does not verify against the anchors for %v: %v", usage, err)
		}
	}
	if len(leaf.DNSNames) != 1 || leaf.DNSNames[0] != testID {
		t.Errorf("DNS SANs = %q, want [%q]", leaf.DNSNames, testID)
	}
	if leaf.IsCA {
		t.Error("leaf is a CA")
	}
	if leaf.PublicKeyAlgorithm != x509.ECDSA {
		t.Errorf("leaf key algorithm %v, want ECDSA", leaf.PublicKeyAlgorithm)
	}
	if nb := leaf.NotBefore; nb.After(before.Add(-19*time.Second)) || nb.Before(before.Add(-22*time.Second)) {
		t.Errorf("NotBefore %v is not about now-20s (now %v)", nb, before)
	}
	if d := leaf.NotAfter.Sub(leaf.NotBefore); d < 24*time.Hour || d > 24*time.Hour+21*time.Second {
		t.Errorf("validity %v, want 24h plus the 20s skew", d)
	}
	if !rsp.GetValidUntil().AsTime().Equal(leaf.NotAfter) {
		t.Errorf("valid_until %v != leaf NotAfter %v", rsp.GetValidUntil().AsTime(), leaf.NotAfter)
	}
	if got := counterValue(t, s, "issued", "OK"); got != 1 {
		t.Errorf("identity_certify_requests_total{result=issued,code=OK} = %v, want 1", got)
	}
	exp := gaugeValue(t, s, "identity_cert_expiration_timestamp_seconds")
	if exp != float64(p.issuer.NotAfter.Unix()) {
		t.Errorf("identity_cert_expiration_timestamp_seconds = %v, want %v", exp, p.issuer.NotAfter.Unix())
	}
}

func TestCertifyRefusals(t *testing.T) {
	p := newPKI(t)
	s := startServer(t, p, serverOpts{})
	goodTok := p.token(t, testNS, testSA)
	goodCSR := makeCSR(t, csrSpec{dns: []string{testID}})

	other := newPKI(t) // a foreign signer: another local mesh
	expired, err := identity.MintLocalToken(p.tokenKey, testNS, testSA, identity.Audience, time.Now().Add(-2*time.Hour), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	wrongAud, err := identity.MintLocalToken(p.tokenKey, testNS, testSA, "kubernetes.default.svc", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	otherID := identity.ServiceAccountIdentity(testNS, "db", "linkerd", "cluster.local")

	cases := []struct {
		name     string
		identity string
		token    []byte
		csr      []byte
		code     codes.Code
		msg      string
	}{
		{"missing identity", "", goodTok, goodCSR, codes.InvalidArgument, "missing identity"},
		{"missing token", testID, nil, goodCSR, codes.InvalidArgument, "missing token"},
		{"missing CSR", testID, goodTok, nil, codes.InvalidArgument, "missing certificate signing request"},
		{"unparsable CSR", testID, goodTok, []byte("not a csr"), codes.InvalidArgument, "not a DER CSR"},
		{"PEM CSR", testID, goodTok, []byte("-----BEGIN CERTIFICATE REQUEST-----\nMIIB\n-----END CERTIFICATE REQUEST-----\n"), codes.InvalidArgument, "not a DER CSR"},
		{"CSR SAN differs", testID, goodTok, makeCSR(t, csrSpec{dns: []string{otherID}}), codes.FailedPrecondition, "does not match the requested identity"},
		{"CSR without SAN", testID, goodTok, makeCSR(t, csrSpec{cn: testID}), codes.FailedPrecondition, "exactly one DNS SAN"},
		{"extra DNS SAN", testID, goodTok, makeCSR(t, csrSpec{dns: []string{testID, "evil.example.com"}}), codes.FailedPrecondition, "exactly one DNS SAN"},
		{"IP SAN", testID, goodTok, makeCSR(t, csrSpec{dns: []string{testID}, ips: []net.IP{net.IPv4(10, 0, 0, 1)}}), codes.FailedPrecondition, "IP SANs"},
		{"e-mail SAN", testID, goodTok, makeCSR(t, csrSpec{dns: []string{testID}, mail: []string{"a@b.c"}}), codes.FailedPrecondition, "e-mail SANs"},
		{"CN mismatch", testID, goodTok, makeCSR(t, csrSpec{cn: "admin", dns: []string{testID}}), codes.FailedPrecondition, "common name"},
		{"RSA key", testID, goodTok, makeCSR(t, csrSpec{dns: []string{testID}, key: rsaKey}), codes.FailedPrecondition, "ECDSA P-256"},
		{"wrong service account", otherID, goodTok, makeCSR(t, csrSpec{dns: []string{otherID}}), codes.FailedPrecondition, "does not match the token's ServiceAccount"},
		{"other trust domain", identity.ServiceAccountIdentity(testNS, testSA, "linkerd", "example.org"), goodTok,
			makeCSR(t, csrSpec{dns: []string{identity.ServiceAccountIdentity(testNS, testSA, "linkerd", "example.org")}}), codes.FailedPrecondition, "does not match"},
		{"expired token", testID, expired, goodCSR, codes.Unauthenticated, "expired"},
		{"wrong audience", testID, wrongAud, goodCSR, codes.Unauthenticated, "audiences"},
		{"foreign token", testID, other.token(t, testNS, testSA), goodCSR, codes.Unauthenticated, "could not be authenticated"},
		{"malformed token", testID, []byte("garbage"), goodCSR, codes.Unauthenticated, "malformed token"},
		{"tampered token", testID, tamper(goodTok), goodCSR, codes.Unauthenticated, "could not be authenticated"},
		{"not a service account", testID, mintSubject(t, p, "alice"), goodCSR, codes.FailedPrecondition, "system:serviceaccount:NS:SA"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.certify(t, &pb.CertifyRequest{Identity: tc.identity, Token: tc.token, CertificateSigningRequest: tc.csr})
			testutil.WantStatus(t, err, tc.code, tc.msg)
		})
	}
	if got := counterValue(t, s, "refused", "FailedPrecondition"); got < 9 {
		t.Errorf("refused/FailedPrecondition counter = %v, want at least 9", got)
	}
}

// tamper rewrites the claims to another ServiceAccount, keeping the original signature.
func tamper(tok []byte) []byte {
	parts := strings.Split(string(tok), ".")
	claims, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		panic(err)
	}
	forged := strings.Replace(string(claims), ":"+testSA+`"`, `:admin"`, 1)
	if forged == string(claims) {
		panic("tamper: subject not found in claims")
	}
	parts[1] = base64.RawURLEncoding.EncodeToString([]byte(forged))
	return []byte(strings.Join(parts, "."))
}

func mintSubject(t *testing.T, p *pki, sub string) []byte {
	t.Helper()
	// MintLocalToken builds system:serviceaccount:NS:SA; a bare user needs a custom subject,
	// so review a token whose namespace segment breaks the form.
	tok, err := identity.MintLocalToken(p.tokenKey, "a:b", sub, identity.Audience, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestCertifyUnavailableBeforeIssuerLoads(t *testing.T) {
	p := newPKI(t)
	s := startServer(t, p, serverOpts{noLoad: true, cfg: func(c *identity.Config) { c.ReloadInterval = time.Hour }})
	_, err := s.certify(t, certifyRequest(t, p))
	testutil.WantStatus(t, err, codes.Unavailable, "")
	if s.svc.Ready() == nil {
		t.Error("Ready() = nil before the issuer loaded")
	}
}

func TestLeafNeverOutlivesIssuer(t *testing.T) {
	p := newPKI(t)
	issuer := p.rotate(t, time.Now().Add(time.Hour))
	s := startServer(t, p, serverOpts{})
	_, leaf := issue(t, s, p)
	if !leaf.NotAfter.Equal(issuer.NotAfter) {
		t.Fatalf("leaf NotAfter %v, want the issuer's %v", leaf.NotAfter, issuer.NotAfter)
	}
}

type fakeReviewer struct {
	rv  identity.Review
	err error
}

func (f fakeReviewer) Review(context.Context, []byte) (identity.Review, error) { return f.rv, f.err }

func TestCertifyReviewerDown(t *testing.T) {
	p := newPKI(t)
	s := startServer(t, p, serverOpts{reviewer: fakeReviewer{err: context.DeadlineExceeded}})
	req := certifyRequest(t, p)
	req.Token = []byte("x")
	_, err := s.certify(t, req)
	testutil.WantStatus(t, err, codes.Unavailable, "")
	if got := counterValue(t, s, "failed", "Unavailable"); got != 1 {
		t.Errorf("failed/Unavailable counter = %v, want 1", got)
	}
}
