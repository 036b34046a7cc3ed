package identity_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/pem"
	"strings"
	"testing"

	pb "github.com/linkerd/linkerd2-proxy-api/go/identity"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestCertifyErrorsAreShortAndPrecise sends Certify requests over real gRPC whose errors
// must quote at most 256 bytes of a 1 MB identity (saying how long it was), show 'é' as 'é',
// name the curve of a wrong ECDSA key, and recognise a PEM CSR.
func TestCertifyErrorsAreShortAndPrecise(t *testing.T) {
	p := newPKI(t)
	s := startServer(t, p, serverOpts{})
	tok := p.token(t, testNS, testSA)
	goodCSR := makeCSR(t, csrSpec{dns: []string{testID}})
	p224, err := ecdsa.GenerateKey(elliptic.P224(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	mb := strings.Repeat("a", 1<<20)
	nul := strings.Repeat("\x00", 1<<20)
	accented := strings.Replace(testID, "e", "é", 1)
	pemCSR := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: goodCSR})
	for _, c := range []struct {
		name, identity string
		csr            []byte
		code           codes.Code
		want           []string
	}{
		{"1 MB identity", mb, goodCSR, codes.FailedPrecondition, []string{`the requested identity "` + strings.Repeat("a", 256) + `"... (1048576 bytes)`}},
		{"1 MB of NUL", nul, goodCSR, codes.FailedPrecondition, []string{`"` + strings.Repeat(`\x00`, 64) + `"... (1048576 bytes)`}},
		{"1 MB identity, no SAN", mb, makeCSR(t, csrSpec{cn: testID}), codes.FailedPrecondition, []string{"exactly one DNS SAN", "(1048576 bytes)"}},
		{"a rune", accented, goodCSR, codes.FailedPrecondition, []string{`the requested identity "` + accented + `"`}},
		{"P-224", testID, makeCSR(t, csrSpec{dns: []string{testID}, key: p224}), codes.FailedPrecondition, []string{"CSR key is ECDSA P-224; want P-256"}},
		{"PEM", testID, pemCSR, codes.InvalidArgument, []string{"this looks like PEM; send the DER bytes"}},
		{"not ASN.1", testID, []byte("not a csr"), codes.InvalidArgument, []string{"certificate signing request (9 bytes) is not a DER CSR: its ASN.1 does not parse"}},
		{"PEM after blank lines", testID, append([]byte("\n\n"), pemCSR...), codes.InvalidArgument, []string{"this looks like PEM; send the DER bytes"}},
	} {
		_, err := s.certify(t, &pb.CertifyRequest{Identity: c.identity, Token: tok, CertificateSigningRequest: c.csr})
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
