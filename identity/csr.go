package identity

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/x509"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
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
	csr, err := x509.ParseCertificateRequest(der)
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "certificate signing request is not a DER CSR: %v", err)
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
		return fail("CSR must have exactly one DNS SAN (the identity %q), it has %d", identity, len(csr.DNSNames))
	}
	if csr.DNSNames[0] != identity {
		return fail("CSR DNS SAN %q does not match the requested identity %q", csr.DNSNames[0], identity)
	}
	if cn := csr.Subject.CommonName; cn != "" && cn != identity {
		return fail("CSR common name %q must be empty or the requested identity %q", cn, identity)
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
	if !ok || pub.Curve != elliptic.P256() {
		return fail("CSR key must be ECDSA P-256, got %T", csr.PublicKey)
	}
	return nil
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
