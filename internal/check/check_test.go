package check

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/meridian-mesh/meridian/internal/tlsid"
)

func TestGauge(t *testing.T) {
	metrics := []byte("# HELP destination_owned_services x\n# TYPE destination_owned_services gauge\n" +
		"destination_owned_services_total 9\ndestination_owned_services 12\nother 1\n")
	if n, err := gauge(metrics, "destination_owned_services"); err != nil || n != 12 {
		t.Fatalf("gauge = %d, %v; want 12", n, err)
	}
	for _, bad := range []string{"", "destination_owned_services \n", "destination_owned_services abc\n", "destination_owned_services_x 1\n"} {
		if _, err := gauge([]byte(bad), "destination_owned_services"); err == nil {
			t.Errorf("gauge(%q) did not fail", bad)
		}
	}
}

func FuzzGauge(f *testing.F) {
	f.Add([]byte("destination_owned_services 12\n"))
	f.Add([]byte("destination_owned_services \n"))
	f.Add([]byte("destination_owned_services 1e400\n"))
	f.Add([]byte("destination_owned_services NaN"))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = gauge(b, "destination_owned_services")
	})
}

// keyPair returns a self-signed certificate valid from nb to na and its key, in PEM.
func keyPair(t *testing.T, nb, na time.Time) (crtPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "x"}, NotBefore: nb, NotAfter: na}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})
}

func cert(t *testing.T, nb, na time.Time) *x509.Certificate {
	t.Helper()
	crtPEM, _ := keyPair(t, nb, na)
	certs, err := tlsid.ParseCertificates(crtPEM, "certificate")
	if err != nil {
		t.Fatal(err)
	}
	return certs[0]
}

func TestExpiry(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	day := 24 * time.Hour
	for _, c := range []struct {
		nb, na time.Time
		want   string
	}{
		{now.Add(-day), now.Add(90 * day), ""},
		{now.Add(-day), now.Add(60 * day), ""},
		{now.Add(-day), now.Add(30 * day), "expires in 30 days (2030-01-31T00:00:00Z), sooner than 60 days"},
		{now.Add(-day), now.Add(-time.Hour), "expired on 2029-12-31T23:00:00Z"},
		{now.Add(day), now.Add(90 * day), "not valid before 2030-01-02T00:00:00Z"},
	} {
		if got := expiry("it", cert(t, c.nb, c.na), now, 60*day); !strings.Contains(got, c.want) || (c.want == "") != (got == "") {
			t.Errorf("expiry(%v..%v) = %q, want %q", c.nb, c.na, got, c.want)
		}
	}
}

func TestChartCRDs(t *testing.T) {
	crds, err := chartCRDs()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range crds {
		names = append(names, c.name)
		if len(c.versions) == 0 {
			t.Errorf("chart CRD %s: no versions read", c.name)
		}
	}
	want := "authorizationpolicies.policy.linkerd.io meshtlsauthentications.policy.linkerd.io networkauthentications.policy.linkerd.io serverauthorizations.policy.linkerd.io servers.policy.linkerd.io serviceprofiles.linkerd.io"
	if strings.Join(names, " ") != want {
		t.Fatalf("chart CRDs = %v", names)
	}
}

func TestReportOutput(t *testing.T) {
	rep := Report{Namespace: "linkerd", Results: []Result{
		{Name: "a", OK: true, Message: "fine"},
		{Name: "b", Message: "2 problems", Details: []string{"x is down", "y is down"}, Hint: "restart them"},
		{Name: "c", Skipped: true, Message: "skipped: b failed"},
	}}
	var b bytes.Buffer
	if err := rep.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	want := "meridian check (namespace linkerd)\n\n✓ a: fine\n× b: 2 problems\n    x is down\n    y is down\n    → restart them\n- c: skipped: b failed\n\n1 of 3 checks failed\n"
	if b.String() != want {
		t.Fatalf("text =\n%s\nwant\n%s", b.String(), want)
	}
	b.Reset()
	if err := rep.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(b.Bytes(), &back); err != nil || len(back.Results) != 3 || back.Results[1].Hint != "restart them" {
		t.Fatalf("JSON round trip: %v %+v", err, back)
	}
	if f := rep.Failed(); len(f) != 1 || f[0].Name != "b" {
		t.Fatalf("Failed = %+v", f)
	}
}
