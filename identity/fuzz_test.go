package identity_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"strings"
	"testing"
	"time"

	pb "github.com/linkerd/linkerd2-proxy-api/go/identity"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/meridian-mesh/meridian/identity"
)

// FuzzCheckCSR: any bytes as a CSR and any identity yield a parsed CSR or a precise status
// (InvalidArgument for what does not parse, FailedPrecondition for what asks for the wrong
// names), never a panic.
func FuzzCheckCSR(f *testing.F) {
	f.Add(makeCSR(f, csrSpec{dns: []string{testID}}), testID)
	f.Add(makeCSR(f, csrSpec{cn: testID, dns: []string{testID, "x"}}), testID)
	f.Add(makeCSR(f, csrSpec{cn: "other", dns: []string{testID}}), testID)
	f.Add([]byte{0x30, 0x03, 0x02, 0x01, 0x00}, "a")
	f.Add([]byte{}, "")
	f.Add(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: makeCSR(f, csrSpec{dns: []string{testID}})}), testID)
	p224, err := ecdsa.GenerateKey(elliptic.P224(), rand.Reader)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(makeCSR(f, csrSpec{dns: []string{testID}, key: p224}), testID)
	f.Add(makeCSR(f, csrSpec{dns: []string{testID}}), strings.Repeat("\x00", 4096))
	// Errors quote a bounded prefix of what was sent.
	short := func(t *testing.T, err error) {
		if msg := status.Convert(err).Message(); len(msg) > 2048 {
			t.Fatalf("a %d-byte error message", len(msg))
		}
	}
	f.Fuzz(func(t *testing.T, der []byte, id string) {
		csr, err := identity.ParseCSR(der)
		if err != nil {
			if c := status.Code(err); c != codes.InvalidArgument {
				t.Fatalf("ParseCSR: code %v (%v), want InvalidArgument", c, err)
			}
			short(t, err)
			return
		}
		if err := identity.CheckCSR(csr, id); err != nil {
			if c := status.Code(err); c != codes.FailedPrecondition {
				t.Fatalf("CheckCSR: code %v (%v), want FailedPrecondition", c, err)
			}
			short(t, err)
			return
		}
		if len(csr.DNSNames) != 1 || csr.DNSNames[0] != id {
			t.Fatalf("CheckCSR accepted DNS SANs %q for %q", csr.DNSNames, id)
		}
	})
}

// FuzzCertify calls the handler with arbitrary identity, token and CSR bytes: it never
// panics, always answers with a status code from Linkerd's set, and only issues a
// certificate for exactly the identity the token proves.
func FuzzCertify(f *testing.F) {
	p := newPKI(f)
	svc := loadedService(f, p)
	tok := p.token(f, testNS, testSA)
	csr := makeCSR(f, csrSpec{dns: []string{testID}})
	f.Add(testID, tok, csr)
	f.Add(testID, []byte("garbage"), csr)
	f.Add(testID, tok, []byte("garbage"))
	f.Add("", []byte{}, []byte{})
	f.Add(identity.ServiceAccountIdentity(testNS, "db", "linkerd", "cluster.local"), tok, makeCSR(f, csrSpec{dns: []string{identity.ServiceAccountIdentity(testNS, "db", "linkerd", "cluster.local")}}))
	f.Add(testID, append(append([]byte{}, tok[:len(tok)-4]...), "AAAA"...), csr)
	f.Fuzz(func(t *testing.T, id string, token, der []byte) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		rsp, err := svc.Certify(ctx, &pb.CertifyRequest{Identity: id, Token: token, CertificateSigningRequest: der})
		if err != nil {
			st, ok := status.FromError(err)
			if !ok {
				t.Fatalf("error without a status: %v", err)
			}
			switch st.Code() {
			case codes.InvalidArgument, codes.FailedPrecondition, codes.Unauthenticated:
			default:
				t.Fatalf("unexpected code %v: %v", st.Code(), err)
			}
			if rsp != nil {
				t.Fatal("response together with an error")
			}
			return
		}
		if id != testID {
			t.Fatalf("issued a certificate for %q with a token for %q", id, testID)
		}
		leaf, err := x509.ParseCertificate(rsp.GetLeafCertificate())
		if err != nil {
			t.Fatalf("issued leaf does not parse: %v", err)
		}
		if len(leaf.DNSNames) != 1 || leaf.DNSNames[0] != id {
			t.Fatalf("issued DNS SANs %q for %q", leaf.DNSNames, id)
		}
	})
}

// FuzzLocalReviewer: arbitrary tokens are reviewed without panics or errors, and only a
// token that verifies under the key authenticates.
func FuzzLocalReviewer(f *testing.F) {
	p := newPKI(f)
	r := identity.NewLocalReviewer(&p.tokenKey.PublicKey)
	good := p.token(f, testNS, testSA)
	f.Add(good)
	f.Add([]byte("a.b.c"))
	f.Add([]byte("eyJhbGciOiJFUzI1NiIsInR5cCI6IkpXVCJ9.e30.AAAA"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, tok []byte) {
		rv, err := r.Review(context.Background(), tok)
		if err != nil {
			t.Fatalf("Review returned an error: %v", err)
		}
		if rv.Authenticated && (rv.Error != "" || rv.Username == "") {
			t.Fatalf("inconsistent review %+v", rv)
		}
		if rv.Authenticated && string(tok) != string(good) && rv.Username != "system:serviceaccount:"+testNS+":"+testSA {
			t.Fatalf("authenticated a forged token as %q", rv.Username)
		}
	})
}
