package identity

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"fmt"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/meridian-mesh/meridian/internal/quote"
)

// MaxCSRSize bounds the CSR a request may carry; a P-256 CSR is a few hundred bytes.
const MaxCSRSize = 16 << 10

// ParseCSR parses a DER certificate signing request and checks its self-signature (proof
// that the requester holds the key). Errors are InvalidArgument statuses.
func ParseCSR(der []byte) (*x509.CertificateRequest, error) {
	if len(der) == 0 {
		return nil, status.Error(codes.InvalidArgument, "missing certificate signing request")
	}
	if len(der) > MaxCSRSize {
		return nil, status.Errorf(codes.InvalidArgument, "certificate signing request is %d bytes, over the %d-byte limit", len(der), MaxCSRSize)
	}
	if bytes.HasPrefix(bytes.TrimSpace(der), []byte("-----BEGIN")) {
		return nil, status.Error(codes.InvalidArgument, "certificate signing request is not a DER CSR: this looks like PEM; send the DER bytes")
	}
	csr, err := x509.ParseCertificateRequest(der)
	if err != nil {
		// x509's reasons can quote the input (an unparsable URI SAN, whole): a prefix only.
		reason := quote.Message(err.Error())
		if strings.HasPrefix(err.Error(), "asn1:") {
			// encoding/asn1 prints the structures it compared: noise to the sender.
			reason = "its ASN.1 does not parse"
		}
		return nil, status.Errorf(codes.InvalidArgument, "certificate signing request (%d bytes) is not a DER CSR: %s", len(der), reason)
	}
	if err := csr.CheckSignature(); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "certificate signing request signature does not verify: %v", err)
	}
	return csr, nil
}

// CheckCSR checks that csr asks for exactly identity: one DNS SAN equal to it, a CN empty
// or equal to it, no e-mail, IP or URI SANs, and an ECDSA P-256 key. Errors are
// FailedPrecondition statuses naming what is wrong.
func CheckCSR(csr *x509.CertificateRequest, identity string) error {
	fail := func(format string, args ...any) error {
		return status.Error(codes.FailedPrecondition, fmt.Sprintf(format, args...))
	}
	if len(csr.DNSNames) != 1 {
		return fail("CSR must have exactly one DNS SAN (the identity %s), it has %d", quote.String(identity), len(csr.DNSNames))
	}
	if csr.DNSNames[0] != identity {
		return fail("CSR DNS SAN %s does not match the requested identity %s", quote.String(csr.DNSNames[0]), quote.String(identity))
	}
	if cn := csr.Subject.CommonName; cn != "" && cn != identity {
		return fail("CSR common name %s must be empty or the requested identity %s", quote.String(cn), quote.String(identity))
	}
	if len(csr.EmailAddresses) > 0 {
		return fail("CSR must not carry e-mail SANs (%d found)", len(csr.EmailAddresses))
	}
	if len(csr.IPAddresses) > 0 {
		return fail("CSR must not carry IP SANs (%d found)", len(csr.IPAddresses))
	}
	if len(csr.URIs) > 0 {
		return fail("CSR must not carry URI SANs (%d found)", len(csr.URIs))
	}
	pub, ok := csr.PublicKey.(*ecdsa.PublicKey)
	switch {
	case !ok:
		return fail("CSR key is %s; want ECDSA P-256", describeKey(csr.PublicKey))
	case pub.Curve != elliptic.P256():
		return fail("CSR key is %s; want P-256", describeKey(csr.PublicKey))
	}
	return nil
}

// describeKey names a public key's algorithm and size or curve: "ECDSA P-224", "RSA 2048-bit".
func describeKey(k any) string {
	switch k := k.(type) {
	case *ecdsa.PublicKey:
		if k.Curve == nil {
			return "ECDSA with no curve"
		}
		return "ECDSA " + k.Curve.Params().Name
	case *rsa.PublicKey:
		return fmt.Sprintf("RSA %d-bit", k.N.BitLen())
	case ed25519.PublicKey:
		return "Ed25519"
	case nil:
		return "of an unknown algorithm"
	}
	return fmt.Sprintf("%T", k)
}

// checkRequest checks the request fields and the CSR, in Linkerd's order, and returns the
// parsed CSR. Errors are gRPC statuses.
func checkRequest(identity string, token, csrDER []byte) (*x509.CertificateRequest, error) {
	if identity == "" {
		return nil, status.Error(codes.InvalidArgument, "missing identity")
	}
	if len(token) == 0 {
		return nil, status.Error(codes.InvalidArgument, "missing token")
	}
	if len(token) > MaxTokenSize {
		return nil, status.Errorf(codes.InvalidArgument, "token is %d bytes, over the %d-byte limit", len(token), MaxTokenSize)
	}
	csr, err := ParseCSR(csrDER)
	if err != nil {
		return nil, err
	}
	if err := CheckCSR(csr, identity); err != nil {
		return nil, err
	}
	return csr, nil
}
