package proxytest

import (
	"testing"

	"github.com/meridian-mesh/meridian/internal/testutil"
	"github.com/meridian-mesh/meridian/internal/tlsid"
)

// TLS is the tlsid configuration of a workload with identity id, a leaf of p; with id ""
// the workload has no certificate (it still verifies peers against p).
func TLS(t testing.TB, p *testutil.PKI, id string) *tlsid.Config {
	t.Helper()
	var certs tlsid.Certs
	if id != "" {
		certs = testutil.StaticCert{Cert: p.Leaf(t, id)}
	}
	c, err := tlsid.New(certs, p.Roots)
	if err != nil {
		t.Fatalf("tlsid for %q: %v", id, err)
	}
	return c
}
