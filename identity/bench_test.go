package identity_test

import (
	"context"
	"testing"

	pb "github.com/linkerd/linkerd2-proxy-api/go/identity"

	"github.com/meridian-mesh/meridian/identity"
)

// BenchmarkCertify measures one accepted Certify through the handler (CSR parse and
// checks, local token review, leaf signing), without the network.
func BenchmarkCertify(b *testing.B) {
	p := newPKI(b)
	svc := loadedService(b, p)
	req := certifyRequest(b, p)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := svc.Certify(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRefuseWrongIdentity measures the cheapest refusal after a token review.
func BenchmarkRefuseWrongIdentity(b *testing.B) {
	p := newPKI(b)
	svc := loadedService(b, p)
	other := identity.ServiceAccountIdentity(testNS, "db", "linkerd", "cluster.local")
	req := &pb.CertifyRequest{Identity: other, Token: p.token(b, testNS, testSA), CertificateSigningRequest: makeCSR(b, csrSpec{dns: []string{other}})}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := svc.Certify(ctx, req); err == nil {
			b.Fatal("accepted")
		}
	}
}
