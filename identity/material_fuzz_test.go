package identity_test

import (
	"context"
	"crypto/elliptic"
	"encoding/pem"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/meridian-mesh/meridian/identity"
)

// FuzzParseServiceAccountUser: a reviewed username is accepted only when it is exactly
// system:serviceaccount:NS:SA with DNS labels NS and SA, and errors quote a bounded prefix.
func FuzzParseServiceAccountUser(f *testing.F) {
	for _, s := range []string{"system:serviceaccount:emojivoto:web", "system:serviceaccount:a:b:c", "system:serviceaccount::web",
		"system:serviceaccount:Emoji:web", "system:node:n1", "", "system:serviceaccount:w\u00e9b:x", strings.Repeat(":", 5000)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ns, sa, err := identity.ParseServiceAccountUser(s)
		if err != nil {
			if len(err.Error()) > 1024 {
				t.Fatalf("a %d-byte error", len(err.Error()))
			}
			return
		}
		if "system:serviceaccount:"+ns+":"+sa != s {
			t.Fatalf("%q parsed as %q / %q", s, ns, sa)
		}
		if len(validation.IsDNS1123Label(ns)) > 0 || len(validation.IsDNS1123Label(sa)) > 0 {
			t.Fatalf("%q: accepted %q / %q, not DNS labels", s, ns, sa)
		}
	})
}

// FuzzParseLocalTokenKey: any bytes as a token signing key yield an error or a P-256 key
// that signs tokens the local reviewer accepts.
func FuzzParseLocalTokenKey(f *testing.F) {
	g, err := identity.GenerateInstall("cluster.local", "linkerd", time.Hour, time.Now(), true)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(g.LocalTokenKey)
	f.Add(g.KeyPEM)
	f.Add(g.AnchorsPEM)
	f.Add(append(append([]byte{}, g.AnchorsPEM...), g.LocalTokenKey...))
	f.Add(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: []byte{0x30, 0x00}}))
	f.Add(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: []byte{0x30, 0x03, 0x02, 0x01, 0x00}}))
	f.Add([]byte("-----BEGIN PRIVATE KEY-----\n-----END PRIVATE KEY-----\n"))
	now := time.Now()
	f.Fuzz(func(t *testing.T, b []byte) {
		k, err := identity.ParseLocalTokenKey(b)
		if err != nil {
			if len(err.Error()) > 1024 {
				t.Fatalf("a %d-byte error", len(err.Error()))
			}
			return
		}
		if k.Curve != elliptic.P256() {
			t.Fatalf("accepted a key on %s", k.Curve.Params().Name)
		}
		tok, err := identity.MintLocalToken(k, "shop", "web", identity.Audience, now, time.Minute)
		if err != nil {
			t.Fatalf("mint with an accepted key: %v", err)
		}
		r := identity.NewLocalReviewer(&k.PublicKey)
		r.Now = func() time.Time { return now }
		rv, err := r.Review(context.Background(), tok)
		if err != nil || !rv.Authenticated || rv.Username != "system:serviceaccount:shop:web" {
			t.Fatalf("a token signed with an accepted key reviews as %+v, %v", rv, err)
		}
	})
}

// FuzzLoadIssuer: any bytes as the issuer certificate, key and trust anchors yield an issuer
// or an error of bounded length, never a panic; an issuer is valid now and never outlives its
// certificate.
func FuzzLoadIssuer(f *testing.F) {
	now := time.Now()
	g, err := identity.GenerateInstall("cluster.local", "linkerd", time.Hour, now, false)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(g.CertPEM, g.KeyPEM, g.AnchorsPEM)
	f.Add(g.AnchorsPEM, g.KeyPEM, g.AnchorsPEM)
	f.Add(g.CertPEM, g.AnchorKeyPEM, g.AnchorsPEM)
	f.Add(g.CertPEM, g.KeyPEM, g.CertPEM)
	f.Add(append(append([]byte{}, g.CertPEM...), g.AnchorsPEM...), g.KeyPEM, g.AnchorsPEM)
	f.Add([]byte{}, []byte{}, []byte{})
	// A certificate whose subject is long: errors naming it quote a prefix.
	anchor := mustCert(f, g.AnchorsPEM)
	anchorKey := mustKey(f, g.AnchorKeyPEM)
	long, _, err := identity.NewCA(strings.Repeat("x", 4000), now.Add(-time.Minute), now.Add(time.Hour), anchor, anchorKey)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: long.Raw}), g.KeyPEM, g.AnchorsPEM)
	f.Fuzz(func(t *testing.T, cert, key, anchors []byte) {
		is, err := identity.LoadIssuer(identity.Material{CertPEM: cert, KeyPEM: key, AnchorsPEM: anchors}, now)
		if err != nil {
			if len(err.Error()) > 2048 {
				t.Fatalf("a %d-byte error: %.300s...", len(err.Error()), err)
			}
			return
		}
		if now.Before(is.Cert.NotBefore) || now.After(is.Cert.NotAfter) || is.NotAfter.After(is.Cert.NotAfter) {
			t.Fatalf("issuer valid %v..%v (until %v) loaded at %v", is.Cert.NotBefore, is.Cert.NotAfter, is.NotAfter, now)
		}
		if !is.Cert.IsCA || len(is.Chain) == 0 {
			t.Fatalf("issuer IsCA=%v with %d chain certificates", is.Cert.IsCA, len(is.Chain))
		}
	})
}
