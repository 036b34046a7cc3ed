package identity_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"net/url"
	"strings"
	"testing"

	pb "github.com/linkerd/linkerd2-proxy-api/go/identity"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestCertifyErrorsAreShortAndPrecise sends Certify requests over real gRPC whose errors
// must quote at most 256 bytes of a 1 MB identity (saying how long it was), show 'é' as 'é',
// name the curve of a wrong ECDSA key, and recognise a PEM CSR.
// ecKey returns a new ECDSA key on c.
func ecKey(t *testing.T, c elliptic.Curve) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(c, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestCertifyErrorsAreShortAndPrecise(t *testing.T) {
	p := newPKI(t)
	s := startServer(t, p, serverOpts{})
	tok := p.token(t, testNS, testSA)
	goodCSR := makeCSR(t, csrSpec{dns: []string{testID}})
	p224 := ecKey(t, elliptic.P224())
	mb := strings.Repeat("a", 1<<20)
	nul := strings.Repeat("\x00", 1<<20)
	accented := strings.Replace(testID, "e", "é", 1)
	pemCSR := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: goodCSR})
	// A URI SAN that does not parse, 10 kB long: x509's error quotes it whole.
	longURI, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{DNSNames: []string{testID},
		URIs: []*url.URL{{Scheme: "http", Host: strings.Repeat("a", 10000) + "..b"}}}, ecKey(t, elliptic.P256()))
	if err != nil {
		t.Fatal(err)
	}
	// A local token whose claims name a 10 kB unknown field: json's error quotes it whole,
	// and it is decoded before the signature is checked.
	b64 := base64.RawURLEncoding.EncodeToString
	forged := []byte(b64([]byte(`{"alg":"ES256","typ":"JWT"}`)) + "." + b64([]byte(`{"`+strings.Repeat("A", 10000)+`":1}`)) + "." + b64(make([]byte, 64)))
	for _, c := range []struct {
		name, identity string
		csr            []byte
		code           codes.Code
		want           []string
		token          []byte // nil: a good token
	}{
		{"a 10 kB URI SAN", testID, longURI, codes.InvalidArgument, []string{"is not a DER CSR", "bytes)"}, nil},
		{"a 10 kB unknown claim", testID, goodCSR, codes.Unauthenticated, []string{"invalid token", "bytes)"}, forged},
		{"1 MB identity", mb, goodCSR, codes.FailedPrecondition, []string{`the requested identity "` + strings.Repeat("a", 256) + `"... (1048576 bytes)`}, nil},
		{"1 MB of NUL", nul, goodCSR, codes.FailedPrecondition, []string{`"` + strings.Repeat(`\x00`, 64) + `"... (1048576 bytes)`}, nil},
		{"1 MB identity, no SAN", mb, makeCSR(t, csrSpec{cn: testID}), codes.FailedPrecondition, []string{"exactly one DNS SAN", "(1048576 bytes)"}, nil},
		{"a rune", accented, goodCSR, codes.FailedPrecondition, []string{`the requested identity "` + accented + `"`}, nil},
		{"P-224", testID, makeCSR(t, csrSpec{dns: []string{testID}, key: p224}), codes.FailedPrecondition, []string{"CSR key is ECDSA P-224; want P-256"}, nil},
		{"PEM", testID, pemCSR, codes.InvalidArgument, []string{"this looks like PEM; send the DER bytes"}, nil},
		{"not ASN.1", testID, []byte("not a csr"), codes.InvalidArgument, []string{"certificate signing request (9 bytes) is not a DER CSR: its ASN.1 does not parse"}, nil},
		{"PEM after blank lines", testID, append([]byte("\n\n"), pemCSR...), codes.InvalidArgument, []string{"this looks like PEM; send the DER bytes"}, nil},
	} {
		token := tok
		if c.token != nil {
			token = c.token
		}
		_, err := s.certify(t, &pb.CertifyRequest{Identity: c.identity, Token: token, CertificateSigningRequest: c.csr})
		st := status.Convert(err)
		if st.Code() != c.code {
			t.Errorf("%s: %.300v, want %s", c.name, err, c.code)
			continue
		}
		msg := st.Message()
		if len(msg) > 1024 {
			t.Errorf("%s: a %d-byte message: %.300s", c.name, len(msg), msg)
		}
		for _, bad := range []string{"Ã", "*ecdsa.PublicKey", "asn1:"} {
			if strings.Contains(msg, bad) {
				t.Errorf("%s: message %q has %q", c.name, msg, bad)
			}
		}
		for _, w := range c.want {
			if !strings.Contains(msg, w) {
				t.Errorf("%s: message %.400q lacks %q", c.name, msg, w)
			}
		}
	}
}
