package tlsid

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/meridian-mesh/meridian/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.Main(m, nil)) }

const (
	webID = "web.shop.serviceaccount.identity.linkerd.cluster.local"
	apiID = "api.shop.serviceaccount.identity.linkerd.cluster.local"
)

// handshake runs a client and a server handshake over loopback and returns what each side
// saw: the server's view of the client's identity, and the errors.
func handshake(t *testing.T, client, server *tls.Config) (clientID string, cerr, serr error) {
	t.Helper()
	lis := testutil.Listen(t)
	type res struct {
		id  string
		err error
	}
	done := make(chan res, 1)
	go func() {
		c, err := lis.Accept()
		if err != nil {
			done <- res{err: err}
			return
		}
		defer c.Close()
		tc := tls.Server(c, server)
		_ = tc.SetDeadline(time.Now().Add(5 * time.Second))
		if err := tc.Handshake(); err != nil {
			done <- res{err: err}
			return
		}
		id, err := PeerIdentity(tc.ConnectionState())
		if errors.Is(err, ErrNoIdentity) {
			err = nil
		}
		// Read until the client closes, so that its handshake result is final.
		_, _ = tc.Read(make([]byte, 1))
		done <- res{id: id, err: err}
	}()
	c, err := net.Dial("tcp", lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	tc := tls.Client(c, client)
	_ = tc.SetDeadline(time.Now().Add(5 * time.Second))
	cerr = tc.Handshake()
	if cerr == nil {
		_, _ = tc.Write([]byte("x"))
	}
	_ = tc.Close()
	r := testutil.Recv(t, done, 10*time.Second, "the server's handshake")
	return r.id, cerr, r.err
}

func TestMutualTLS(t *testing.T) {
	p := testutil.NewPKI(t)
	web, _ := New(testutil.StaticCert{Cert: p.Leaf(t, webID)}, p.Roots)
	api, _ := New(testutil.StaticCert{Cert: p.Leaf(t, apiID)}, p.Roots)

	id, cerr, serr := handshake(t, web.Client(apiID, "h2"), api.Server("h2"))
	if cerr != nil || serr != nil || id != webID {
		t.Fatalf("web -> api: client %v, server %v, client identity %q; want %q", cerr, serr, id, webID)
	}

	// The peer is not who discovery says: the client refuses.
	if _, cerr, _ = handshake(t, web.Client("other.shop.serviceaccount.identity.linkerd.cluster.local"), api.Server()); cerr == nil {
		t.Error("a peer with another identity was accepted")
	}

	// A peer from another trust root: refused both ways.
	stranger, _ := New(testutil.StaticCert{Cert: testutil.NewPKI(t).Leaf(t, apiID)}, p.Roots)
	if _, cerr, _ = handshake(t, web.Client(apiID), stranger.Server()); cerr == nil {
		t.Error("a server certificate from another root was accepted")
	}
	if _, _, serr = handshake(t, stranger.Client(apiID), api.Server()); serr == nil {
		t.Error("a client certificate from another root was accepted")
	}

	// A client without a certificate is accepted and proves no identity.
	anon, _ := New(nil, p.Roots)
	id, cerr, serr = handshake(t, anon.Client(apiID), api.Server())
	if cerr != nil || serr != nil || id != "" {
		t.Errorf("anonymous client: %v %v %q", cerr, serr, id)
	}

	// TLS 1.2 is refused.
	old := web.Client(apiID).Clone()
	old.MinVersion, old.MaxVersion = tls.VersionTLS12, tls.VersionTLS12
	if _, cerr, _ = handshake(t, old, api.Server()); cerr == nil {
		t.Error("TLS 1.2 was accepted")
	}
}

func TestClientConfigIsCached(t *testing.T) {
	p := testutil.NewPKI(t)
	c, _ := New(nil, p.Roots)
	first, again, noALPN := c.Client(apiID, "h2"), c.Client(apiID, "h2"), c.Client(apiID)
	if first != again || first == noALPN {
		t.Error("client configs are not cached per identity and ALPN")
	}
	if _, err := New(nil, nil); err == nil {
		t.Error("New without roots succeeded")
	}
}

func TestLooksLikeTLS(t *testing.T) {
	for in, want := range map[string]bool{"\x16\x03\x01\x02": true, "\x16\x03": true, "\x16": false, "GET / HTTP/1.1": false, "PRI * HTTP/2.0": false, "": false} {
		if got := LooksLikeTLS([]byte(in)); got != want {
			t.Errorf("LooksLikeTLS(%q) = %v", in, got)
		}
	}
}

// TestServerRequiringClientCert: the server refuses a client without a certificate, accepts
// one with a mesh certificate and sees its identity.
func TestServerRequiringClientCert(t *testing.T) {
	p := testutil.NewPKI(t)
	web, _ := New(testutil.StaticCert{Cert: p.Leaf(t, webID)}, p.Roots)
	api, _ := New(testutil.StaticCert{Cert: p.Leaf(t, apiID)}, p.Roots)
	anon, _ := New(nil, p.Roots)
	if _, _, serr := handshake(t, anon.Client(apiID), api.ServerRequiringClientCert()); serr == nil {
		t.Error("a client without a certificate was accepted")
	}
	id, cerr, serr := handshake(t, web.Client(apiID), api.ServerRequiringClientCert("h2"))
	if cerr != nil || serr != nil || id != webID {
		t.Errorf("client with a certificate: client %v, server %v, identity %q", cerr, serr, id)
	}
	if api.Roots() != p.Roots {
		t.Error("Roots is not the pool given to New")
	}
}

func TestParseTrustAnchors(t *testing.T) {
	p := testutil.NewPKI(t)
	good := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: p.Anchor.Raw})
	pool, err := ParseTrustAnchors(append([]byte("# comment\n"), good...))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Leaf(t, webID).Leaf.Verify(x509.VerifyOptions{Roots: pool, Intermediates: p.Intermediates, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		t.Errorf("a leaf does not verify against the parsed anchors: %v", err)
	}
	for name, in := range map[string][]byte{
		"empty":        nil,
		"no PEM":       []byte("not a certificate"),
		"only a key":   pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte{1}}),
		"bad DER":      pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte{1, 2, 3}}),
		"good and bad": append(good, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte{1}})...),
	} {
		if _, err := ParseTrustAnchors(in); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// TestParseCertificates: every CERTIFICATE block, in order, other blocks and text skipped;
// an error names the certificate by what and number.
func TestParseCertificates(t *testing.T) {
	p := testutil.NewPKI(t)
	anchor := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: p.Anchor.Raw})
	leafCert := p.Leaf(t, webID).Leaf
	leaf := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leafCert.Raw})
	key := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: []byte{1}})
	in := slices.Concat([]byte("# a bundle\n"), leaf, key, anchor)
	got, err := ParseCertificates(in, "certificate")
	if err != nil || len(got) != 2 || !got[0].Equal(leafCert) || !got[1].Equal(p.Anchor) {
		t.Fatalf("ParseCertificates = %d certificates, %v; want the leaf, then the anchor", len(got), err)
	}
	for name, tc := range map[string]struct {
		in   []byte
		want string
	}{
		"empty":      {nil, "no PEM CERTIFICATE block (a CA certificate) found"},
		"only a key": {key, "no PEM CERTIFICATE block (a CA certificate) found"},
		"second bad": {slices.Concat(anchor, key, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte{1}})), "CA certificate 2: "},
		"first bad":  {pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte{1, 2, 3}}), "CA certificate 1: "},
	} {
		if out, err := ParseCertificates(tc.in, "CA certificate"); err == nil || out != nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %d certificates, error %v; want none and an error containing %q", name, len(out), err, tc.want)
		}
	}
}

// TestTrustAnchorBundle: a bundle that goes into pods' specs is certificates only; a key
// beside good certificates is refused, whole or cut short, and the error names the block
// without quoting more than a short prefix of its type. What pods get is the certificates
// alone.
func TestTrustAnchorBundle(t *testing.T) {
	good := testutil.NewPKI(t).AnchorPEM()
	got, err := TrustAnchorBundle(append([]byte("# comment\n"), good...))
	if err != nil || string(got) != string(good) {
		t.Fatalf("good bundle with a comment: %q, %v; want the certificate alone", got, err)
	}
	longType := strings.Repeat("K", 300)
	key := "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n"
	for name, tc := range map[string]struct {
		in   []byte
		want string
	}{
		"key after the anchor": {append(append([]byte{}, good...), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: []byte{1}})...), `block 2 is a "EC PRIVATE KEY"`},
		"key without END":      {[]byte(string(good) + key), "2 PEM blocks begin, but only 1 are whole"},
		"key with a bad END":   {[]byte(string(good) + key + "-----END PRIVATE KEY----\n"), "2 PEM blocks begin"},
		"key before, no END":   {[]byte(key + string(good)), "2 PEM blocks begin"},
		"long type":            {pem.EncodeToMemory(&pem.Block{Type: longType, Bytes: []byte{1}}), `block 1 is a "` + longType[:64] + `"`},
		"no PEM":               {[]byte("not a certificate"), "no PEM CERTIFICATE block"},
		"bad DER":              {pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte{1, 2, 3}}), "trust anchor 1"},
	} {
		out, err := TrustAnchorBundle(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.want) || out != nil {
			t.Errorf("%s: %q, error %v; want none and an error containing %q", name, out, err, tc.want)
		} else if strings.Contains(err.Error(), longType[:65]) {
			t.Errorf("%s: error quotes more than 64 bytes of the type", name)
		}
	}
	// Bare base64 after the certificate (a key pasted without its lines) never reaches pods.
	if got, err := TrustAnchorBundle([]byte(string(good) + "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n")); err != nil || string(got) != string(good) {
		t.Errorf("bare base64 after the anchor: %q, %v; want the certificate alone", got, err)
	}
}

func FuzzParseTrustAnchors(f *testing.F) {
	f.Add([]byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"))
	f.Add([]byte(""))
	f.Add([]byte("-----BEGIN EC PRIVATE KEY-----\nAAAA\n-----END EC PRIVATE KEY-----\n"))
	f.Add(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte{0x30, 0x03, 0x02, 0x01, 0x01}}))
	f.Fuzz(func(t *testing.T, in []byte) {
		pool, err := ParseTrustAnchors(in)
		if (pool == nil) == (err == nil) {
			t.Fatalf("pool %v with error %v", pool, err)
		}
		// ParseCertificates, which it is made of, agrees: the same certificates (each one of
		// the input's blocks, in its order), or an error.
		certs, lerr := ParseCertificates(in, "certificate")
		if (lerr == nil) != (err == nil) || (lerr == nil) == (len(certs) == 0) {
			t.Fatalf("ParseCertificates: %d certificates, error %v; ParseTrustAnchors: error %v", len(certs), lerr, err)
		}
		rest := in
		for i, c := range certs {
			var b *pem.Block
			for b, rest = pem.Decode(rest); b != nil && b.Type != "CERTIFICATE"; b, rest = pem.Decode(rest) {
			}
			if b == nil || !bytes.Equal(b.Bytes, c.Raw) {
				t.Fatalf("certificate %d is not the input's CERTIFICATE block %d", i+1, i+1)
			}
		}
		if lerr == nil && !pool.Equal(certPool(certs)) {
			t.Fatal("the pool is not of the certificates parsed")
		}
		// The stricter check accepts a subset of what parses, quotes no more of a block's
		// type than 64 bytes, and returns certificates alone, which parse to the same pool.
		out, cerr := TrustAnchorBundle(in)
		if cerr == nil && err != nil {
			t.Fatalf("the check passed a bundle that does not parse: %v", err)
		}
		if cerr != nil && len(cerr.Error()) > 512 {
			t.Fatalf("error of %d bytes: %.100s...", len(cerr.Error()), cerr)
		}
		if cerr == nil {
			again, err := TrustAnchorBundle(out)
			if err != nil || !bytes.Equal(again, out) {
				t.Fatalf("the bundle returned does not check to itself: %v", err)
			}
			if p2, err := ParseTrustAnchors(out); err != nil || !p2.Equal(pool) {
				t.Fatalf("the bundle returned parses to other anchors: %v", err)
			}
		}
	})
}

func certPool(certs []*x509.Certificate) *x509.CertPool {
	p := x509.NewCertPool()
	for _, c := range certs {
		p.AddCert(c)
	}
	return p
}

// TestParseErrorsCutShort: a certificate whose URI SAN does not parse (x509's error quotes
// it whole) gives ParseCertificates and TrustAnchorBundle an error of a short prefix.
func TestParseErrorsCutShort(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	san, err := asn1.Marshal([]asn1.RawValue{{Class: asn1.ClassContextSpecific, Tag: 6, Bytes: []byte("https://a/%zz" + strings.Repeat("x", 100_000))}})
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "long"}, NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour),
		ExtraExtensions: []pkix.Extension{{Id: asn1.ObjectIdentifier{2, 5, 29, 17}, Value: san}}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := x509.ParseCertificate(der); err == nil || len(err.Error()) < 100_000 {
		t.Fatalf("x509 no longer quotes the URI whole (%d bytes): the test shows nothing", len(fmt.Sprint(err)))
	}
	pemData := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	_, err1 := ParseCertificates(pemData, "trust anchor")
	_, err2 := TrustAnchorBundle(pemData)
	for i, err := range []error{err1, err2} {
		if err == nil || !strings.Contains(err.Error(), "trust anchor 1") || len(err.Error()) > 512 {
			t.Errorf("%d: %d bytes: %.300v", i, len(fmt.Sprint(err)), err)
		}
	}
}
